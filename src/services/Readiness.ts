/** Whether the database answers, within a bound, so that `/ready` never hangs. */
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"

export class DatabaseUnavailable extends Schema.TaggedError<DatabaseUnavailable>()("DatabaseUnavailable", {
  message: Schema.String
}) {}

const READY_TIMEOUT = "2 seconds"

export const checkDatabase = Effect.fn("Readiness.checkDatabase")(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`SELECT 1`.pipe(
    Effect.timeout(READY_TIMEOUT),
    Effect.mapError(() => new DatabaseUnavailable({ message: "database unavailable" }))
  )
})
