/** Whether the database answers, within a bound, so that `/ready` never hangs. */
import { Effect, Fiber, Schema } from "effect"
import { SqlClient } from "effect/sql"

export class DatabaseUnavailable extends Schema.TaggedError<DatabaseUnavailable>()("DatabaseUnavailable", {
  message: Schema.String
}) {}

const READY_TIMEOUT = "2 seconds"

/**
 * The probe runs on a fiber of its own and only the wait is timed: interrupting a query on a
 * server that stopped answering would wait for that server, and /ready must answer regardless.
 */
export const checkDatabase = Effect.fn("Readiness.checkDatabase")(function*() {
  const sql = yield* SqlClient.SqlClient
  const probe = yield* Effect.forkDetach(sql`SELECT 1`)
  yield* Fiber.join(probe).pipe(
    Effect.timeout(READY_TIMEOUT),
    Effect.mapError(() => new DatabaseUnavailable({ message: "database unavailable" }))
  )
})
