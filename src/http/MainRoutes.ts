/** The main service's routes: the HttpApi handlers, the plain routes and `/openapi.json`. */
import { Effect, Layer } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { HttpApiBuilder, OpenApi } from "effect/http-api"
import { AuditHandlers } from "./AuditRoutes.ts"
import { AuthenticationLive } from "./Authentication.ts"
import { AccountHandlers, AuthHandlers } from "./AuthRoutes.ts"
import { DataRoutes } from "./DataRoutes.ts"
import { EventsRoute } from "./EventsRoutes.ts"
import { IntrospectionHandlers } from "./IntrospectionRoutes.ts"
import { MainApi, ServedApi } from "./MainApi.ts"
import { health, ready } from "./SystemRoutes.ts"
import { UsersHandlers } from "./UsersRoutes.ts"
import { ValidationErrorsLive } from "./Validation.ts"

const SystemHandlers = HttpApiBuilder.group(ServedApi, "system", (handlers) => handlers.handle("health", health).handle("ready", ready))

const ApiRoutes = HttpApiBuilder.layer(ServedApi).pipe(
  Layer.provide([SystemHandlers, AuthHandlers, AccountHandlers, IntrospectionHandlers, UsersHandlers, AuditHandlers]),
  Layer.provide([ValidationErrorsLive, AuthenticationLive])
)

// Built on the first request for it, not at every start; held by the route of each service built.
const OpenApiRoute = Layer.unwrap(Effect.sync(() => {
  let openApi: HttpServerResponse.HttpServerResponse | undefined
  return HttpRouter.add("GET", "/openapi.json", Effect.sync(() => (openApi ??= HttpServerResponse.jsonUnsafe(OpenApi.fromApi(MainApi)))))
}))

/** The HttpApi routes, plus GET /events (it streams) and the data plane as plain router routes. */
export const MainRoutes = Layer.mergeAll(ApiRoutes, OpenApiRoute, EventsRoute, DataRoutes)
