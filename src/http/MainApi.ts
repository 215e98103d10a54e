/** The main service's HTTP API (spec §4.1). */
import { HttpApi } from "effect/http-api"
import { ValidationErrors } from "./ApiMiddleware.ts"
import { AuditApi } from "./AuditApi.ts"
import { AccountApi, AuthApi } from "./AuthApi.ts"
import { DataApi } from "./DataApi.ts"
import { EventsApi } from "./EventsApi.ts"
import { IntrospectionApi } from "./IntrospectionApi.ts"
import { describeEventStreams } from "./StreamDescription.ts"
import { SystemApi } from "./SystemApi.ts"
import { UsersApi } from "./UsersApi.ts"

/** What HttpApi serves: everything but the data plane and the event stream, which plain routes serve (DataRoutes.ts, EventsRoutes.ts). */
export class ServedApi extends HttpApi.make("plinth").add(SystemApi).add(AuthApi).add(AccountApi).add(IntrospectionApi).add(UsersApi).add(AuditApi).middleware(ValidationErrors) {}

/** What `/openapi.json` documents: every endpoint. */
export class MainApi extends ServedApi.add(DataApi).add(EventsApi).annotateMerge(describeEventStreams) {}
