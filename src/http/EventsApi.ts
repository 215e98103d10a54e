/**
 * GET /events (spec §6.1): served by a plain route (EventsRoutes.ts), which takes the connection
 * over once the stream opens; defined here for /openapi.json.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "effect/http-api"
import { Authentication } from "./ApiMiddleware.ts"
import { RateLimited, Unauthorized, Unavailable } from "./Errors.ts"
import { documented } from "./OperationDocs.ts"
import { PageEvent } from "./PageEvents.ts"

export class EventsApi extends HttpApiGroup.make("events")
  .add(HttpApiEndpoint.get("events", "/events", {
    // The JWT and the tenant, for clients that cannot set the Authorization and X-Tenant headers (EventSource).
    query: { token: Schema.optionalKey(Schema.String), tenant: Schema.optionalKey(Schema.String) },
    success: HttpApiSchema.StreamSse({ events: PageEvent }),
    error: [Unauthorized, RateLimited, Unavailable]
  }).annotateMerge(documented({
    summary: "Page changes as Server-Sent Events",
    description: "Opens with the comment `: connected` (subscribed: nothing after it is missed), then `: heartbeat` every " +
      "EVENTS_HEARTBEAT, `event: page_change` (data `{schema, slug}`: refetch that page) and `event: resync` (data `{}`: events " +
      "may have been missed, refetch what is shown). The JWT in `Authorization` or, for EventSource, as `?token=`; in multi-tenant mode the tenant in `X-Tenant` or, " +
      "for EventSource, as `?tenant=`. " +
      "429: the user has EVENTS_MAX_STREAMS_PER_USER streams open."
  })))
  .middleware(Authentication)
{}
