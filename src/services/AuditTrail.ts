/**
 * The audit trail (sql/sys/14_audit.sql): who changed users, sign-ins and the schema, and when.
 * The sys functions append the events themselves, in the transaction of each change; this module
 * reads them as the caller (owners and admins) and prunes old ones as a database administrator.
 */
import { Effect, Schema } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { executePipelined } from "./AsCaller.ts"
import { sqlState } from "./DatabaseError.ts"
import type { RequestContext } from "./RequestContext.ts"

/** One event, as GET /admin/audit answers it. */
export interface AuditEvent {
  readonly id: number
  /** ISO 8601, UTC. */
  readonly at: string
  readonly actor_id: string | null
  readonly actor_role: string
  readonly action: string
  readonly target: string | null
  readonly details: Readonly<Record<string, unknown>>
  readonly request_id: string | null
}

export class AuditRefused extends Schema.TaggedError<AuditRefused>()("AuditRefused", { message: Schema.String }) {}

const refusal = (error: SqlError.SqlError): AuditRefused | SqlError.SqlError =>
  sqlState(error) === "42501" ? new AuditRefused({ message: "only an owner or an admin may read the audit trail" }) : error

/** The newest events first, at or after `since` (all when absent), at most `limit` (100 when absent: the function's default), read as `context`. */
export const listAuditEvents = Effect.fn("AuditTrail.list")(function*(context: RequestContext, since: Date | undefined, limit: number | undefined) {
  const result = yield* executePipelined(
    context,
    "SELECT id, at, actor_id, actor_role, action, target, details, request_id FROM sys.list_audit_events($1::timestamptz, $2::int)",
    [since === undefined ? null : since.toISOString(), limit ?? null]
  ).pipe(Effect.mapError(refusal))
  // bigint arrives as text (JsonColumnTypes); an event's id stays well below 2^53.
  return result.rows.map((row): AuditEvent => ({ ...(row as unknown as AuditEvent), id: Number(row["id"]) }))
})

/**
 * Deletes the events older than `before` and returns how many, as a database administrator (the
 * SqlClient of an administrator's URL); the prune itself is recorded as an event.
 */
export const pruneAuditEvents = Effect.fn("AuditTrail.prune")(function*(before: Date) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ deleted: string }>`SELECT sys.prune_audit_events(${before.toISOString()}::timestamptz)::text AS deleted`
  return Number(rows[0]?.deleted ?? 0)
})
