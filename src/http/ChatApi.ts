/** The chat service's HTTP API (spec §4.8); `/openapi.json` documents it. */
import { HttpApi } from "effect/http-api"
import { SystemApi } from "./SystemApi.ts"
import { ValidationErrors } from "./Validation.ts"

export class ChatApi extends HttpApi.make("plinth-chat").add(SystemApi).middleware(ValidationErrors) {}
