/** Handlers of the system endpoints, shared by both services. */
import { Effect } from "effect"
import { checkDatabase } from "../services/Readiness.ts"
import { Unavailable } from "./Errors.ts"

export const health = () => Effect.succeed({ status: "ok" as const })

export const ready = () =>
  checkDatabase().pipe(
    Effect.as({ status: "ready" as const }),
    Effect.catchTag("DatabaseUnavailable", (error) => Effect.fail(new Unavailable({ error: error.message })))
  )
