/** The main service's routes: the HttpApi handlers, the plain routes and `/openapi.json`. */
import { Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { AuditHandlers } from "./AuditRoutes.ts"
import { AuthenticationLive } from "./Authentication.ts"
import { AccountHandlers, AuthHandlers } from "./AuthRoutes.ts"
import { DataRoutes } from "./DataRoutes.ts"
import { EventsRoute } from "./EventsRoutes.ts"
import { IntrospectionHandlers } from "./IntrospectionRoutes.ts"
import { MainApi, ServedApi } from "./MainApi.ts"
import { openApiRoute } from "./OpenApiDocument.ts"
import { health, ready } from "./SystemRoutes.ts"
import { UsersHandlers } from "./UsersRoutes.ts"
import { ValidationErrorsLive } from "./Validation.ts"

const SystemHandlers = HttpApiBuilder.group(ServedApi, "system", (handlers) => handlers.handle("health", health).handle("ready", ready))

const ApiRoutes = HttpApiBuilder.layer(ServedApi).pipe(
  Layer.provide([SystemHandlers, AuthHandlers, AccountHandlers, IntrospectionHandlers, UsersHandlers, AuditHandlers]),
  Layer.provide([ValidationErrorsLive, AuthenticationLive])
)

const OpenApiRoute = openApiRoute(MainApi, {
  title: "Plinth",
  description: "Plinth's main service: signing in, SQL and function calls as the caller, introspection, and page events. " +
    "Errors answer `{error: string}`, or, for the database's refusal of the caller's SQL, `{error: {message, code, detail, hint, position}}`."
})

/** The HttpApi routes, plus GET /events (it streams) and the data plane as plain router routes. */
export const MainRoutes = Layer.mergeAll(ApiRoutes, OpenApiRoute, EventsRoute, DataRoutes)
