/**
 * The database side of "who is asking": every request runs in one transaction whose first
 * statement switches to the caller's role and sets `app.user_id` with `set_config(..., true)`,
 * so both end with the transaction and never leak to the next user of the pooled connection.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import type { AppRole } from "./AccessTokens.ts"

export type DatabaseRole = AppRole | "anon"

export interface RequestIdentity {
  readonly role: DatabaseRole
  /** Empty for anonymous requests. */
  readonly userId: string
}

export const ANONYMOUS: RequestIdentity = { role: "anon", userId: "" }

/** Runs `effect` in a transaction as `identity`; any failure rolls everything back. */
export const asIdentity = <A, E, R>(identity: RequestIdentity, effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql.withTransaction(
      sql`SELECT set_config('role', ${identity.role}, true), set_config('app.user_id', ${identity.userId}, true)`.pipe(
        Effect.andThen(effect)
      )
    )
  })
