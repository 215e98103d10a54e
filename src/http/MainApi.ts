/** The main service's HTTP API (spec §4.1). */
import { HttpApi } from "effect/http-api"
import { AccountApi, AuthApi } from "./AuthApi.ts"
import { DataApi } from "./DataApi.ts"
import { IntrospectionApi } from "./IntrospectionApi.ts"
import { SystemApi } from "./SystemApi.ts"
import { ValidationErrors } from "./Validation.ts"

/** What HttpApi serves: everything but the data plane, which plain routes serve (DataRoutes.ts). */
export class ServedApi extends HttpApi.make("plinth").add(SystemApi).add(AuthApi).add(AccountApi).add(IntrospectionApi).middleware(ValidationErrors) {}

/** What `/openapi.json` documents: every endpoint. */
export class MainApi extends ServedApi.add(DataApi) {}
