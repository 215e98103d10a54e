/**
 * The bound on temporary files of a caller's statement (migration 0015 sets `temp_file_limit` for
 * the login roles where it runs as a superuser): where nobody could set it, an operator is told once.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const TEMP_FILE_LIMIT_WARNING =
  "temp_file_limit is not set for this service's database login: one caller's statement may fill the " +
  "server's disk with temporary files. As a superuser, run ALTER ROLE authenticator SET temp_file_limit = '1GB' " +
  "and the same for chat_authenticator"

/** Logs TEMP_FILE_LIMIT_WARNING when the login's sessions have no temp_file_limit; never fails. */
export const warnWithoutTempFileLimit = Effect.fn("ResourceLimits.warnWithoutTempFileLimit")(
  function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ readonly limit: string }>`SELECT current_setting('temp_file_limit') AS limit`
    if (row?.limit === "-1") yield* Effect.logWarning(TEMP_FILE_LIMIT_WARNING)
  },
  Effect.catchCause((cause) => Effect.logDebug("could not read temp_file_limit", cause))
)
