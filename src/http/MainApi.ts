/** The main service's HTTP API (spec §4.1); `/openapi.json` documents it. */
import { HttpApi } from "effect/http-api"
import { AccountApi, AuthApi } from "./AuthApi.ts"
import { DataApi } from "./DataApi.ts"
import { IntrospectionApi } from "./IntrospectionApi.ts"
import { SystemApi } from "./SystemApi.ts"
import { ValidationErrors } from "./Validation.ts"

export class MainApi extends HttpApi.make("plinth").add(SystemApi).add(AuthApi).add(AccountApi).add(DataApi).add(IntrospectionApi).middleware(ValidationErrors) {}
