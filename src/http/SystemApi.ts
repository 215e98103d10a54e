/**
 * Endpoints every Plinth service has: liveness (`/health`, spec §4.6) and readiness (`/ready`:
 * the database answers), for load balancers.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { Unavailable } from "./Errors.ts"

export class SystemApi extends HttpApiGroup.make("system")
  .add(HttpApiEndpoint.get("health", "/health", {
    success: Schema.Struct({ status: Schema.Literal("ok") })
  }))
  .add(HttpApiEndpoint.get("ready", "/ready", {
    success: Schema.Struct({ status: Schema.Literal("ready") }),
    error: Unavailable
  }))
{}
