/** The main service's routes: the HttpApi handlers and `/openapi.json`. */
import { Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { AuthenticationLive } from "./Authentication.ts"
import { AccountHandlers, AuthHandlers } from "./AuthRoutes.ts"
import { DataHandlers, InvalidFunctionNameRoute } from "./DataRoutes.ts"
import { EventsRoute } from "./EventsRoutes.ts"
import { IntrospectionHandlers } from "./IntrospectionRoutes.ts"
import { MainApi } from "./MainApi.ts"
import { health, ready } from "./SystemRoutes.ts"
import { ValidationErrorsLive } from "./Validation.ts"

const SystemHandlers = HttpApiBuilder.group(MainApi, "system", (handlers) => handlers.handle("health", health).handle("ready", ready))

const ApiRoutes = HttpApiBuilder.layer(MainApi, { openapiPath: "/openapi.json" }).pipe(
  Layer.provide([SystemHandlers, AuthHandlers, AccountHandlers, DataHandlers, IntrospectionHandlers]),
  Layer.provide([ValidationErrorsLive, AuthenticationLive])
)

/** The HttpApi routes plus GET /events, which streams and so is a plain router route. */
export const MainRoutes = Layer.mergeAll(ApiRoutes, EventsRoute, InvalidFunctionNameRoute)
