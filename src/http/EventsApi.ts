/**
 * GET /events (spec §6.1): served by a plain route (EventsRoutes.ts), which takes the connection
 * over once the stream opens; defined here for /openapi.json.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "effect/http-api"
import { Authentication } from "./ApiMiddleware.ts"
import { TooManyRequests, Unauthorized, Unavailable } from "./Errors.ts"
import { PageEvent } from "./PageEvents.ts"

export class EventsApi extends HttpApiGroup.make("events")
  .add(HttpApiEndpoint.get("events", "/events", {
    // The JWT, for clients that cannot set the Authorization header (EventSource).
    query: { token: Schema.optionalKey(Schema.String) },
    success: HttpApiSchema.StreamSse({ events: PageEvent }),
    error: [Unauthorized, TooManyRequests, Unavailable]
  }))
  .middleware(Authentication)
{}
