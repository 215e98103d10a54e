/**
 * Endpoints every Plinth service has: liveness (`/health`, spec §4.6) and readiness (`/ready`:
 * the database answers), for load balancers.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { Unavailable } from "./Errors.ts"
import { documented } from "./OperationDocs.ts"

export class SystemApi extends HttpApiGroup.make("system")
  .add(HttpApiEndpoint.get("health", "/health", {
    success: Schema.Struct({ status: Schema.Literal("ok") })
  }).annotateMerge(documented({ summary: "Liveness: the process answers" })))
  .add(HttpApiEndpoint.get("ready", "/ready", {
    success: Schema.Struct({ status: Schema.Literal("ready") }),
    error: Unavailable
  }).annotateMerge(documented({ summary: "Readiness: the database answers", description: "503 when the database does not answer within 2 s." })))
{}
