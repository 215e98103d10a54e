/** GET /admin/audit: the audit trail, for owners and admins (definition only; handler in AuditRoutes.ts). */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { Authentication } from "./ApiMiddleware.ts"
import { BadRequest, Forbidden, Unavailable } from "./Errors.ts"
import { documented } from "./OperationDocs.ts"

/** The most events one read returns (sys.list_audit_events; 100 when the caller does not say). */
const MAX_AUDIT_LIMIT = 1000

const AuditEvent = Schema.Struct({
  id: Schema.Number,
  at: Schema.String,
  actor_id: Schema.NullOr(Schema.String),
  actor_role: Schema.String,
  action: Schema.String,
  target: Schema.NullOr(Schema.String),
  details: Schema.Record(Schema.String, Schema.Unknown),
  request_id: Schema.NullOr(Schema.String)
})

export class AuditApi extends HttpApiGroup.make("audit")
  .add(HttpApiEndpoint.get("listAuditEvents", "/admin/audit", {
    query: {
      // An ISO 8601 date or time: events at or after it.
      since: Schema.optionalKey(Schema.DateFromString),
      limit: Schema.optionalKey(Schema.NumberFromString.pipe(Schema.check(Schema.isInt(), Schema.isBetween({ minimum: 1, maximum: MAX_AUDIT_LIMIT }))))
    },
    success: Schema.Struct({ events: Schema.Array(AuditEvent) }),
    error: [BadRequest, Forbidden, Unavailable]
  }).annotateMerge(documented({
    summary: "Read the audit trail",
    description: "The newest events first, at or after `since`, at most `limit` (1 to 1000; 100 by default). Owners and admins."
  })))
  .middleware(Authentication)
{}
