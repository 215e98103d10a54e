/** The chat service's routes: the HttpApi handlers and `/openapi.json`. */
import { Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { ChatApi } from "./ChatApi.ts"
import { health, ready } from "./SystemRoutes.ts"
import { ValidationErrorsLive } from "./Validation.ts"

const SystemHandlers = HttpApiBuilder.group(ChatApi, "system", (handlers) => handlers.handle("health", health).handle("ready", ready))

export const ChatRoutes = HttpApiBuilder.layer(ChatApi, { openapiPath: "/openapi.json" }).pipe(
  Layer.provide(SystemHandlers),
  Layer.provide(ValidationErrorsLive)
)
