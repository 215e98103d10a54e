/**
 * The database side of "who is asking": every request runs in one transaction whose first
 * statement switches to the caller's role and sets `app.user_id`, `app.app_id`, `search_path`
 * and `statement_timeout`, all with `set_config(..., true)` in one round trip, so that they end
 * with the transaction and never leak to the next user of the pooled connection. The values are
 * bound parameters: nothing here is concatenated from the request.
 */
import { Duration, Effect } from "effect"
import { SqlClient, SqlError } from "effect/sql"
import type { AppRole } from "./AccessTokens.ts"
import { quoteIdentifier } from "./SqlIdentifier.ts"

export type DatabaseRole = AppRole | "anon"

export interface RequestIdentity {
  readonly role: DatabaseRole
  /** Empty for anonymous requests. */
  readonly userId: string
}

/** An app of sys.apps, as X-App-Schema selects it. */
export interface AppRef {
  readonly id: string
  readonly schemaName: string
}

export interface RequestContext extends RequestIdentity {
  /** Absent: the public schema only. */
  readonly app?: AppRef | undefined
  readonly statementTimeout?: Duration.Duration | undefined
  /** A read-only transaction: even a data-modifying CTE fails (the AI's select_data). */
  readonly readOnly?: boolean | undefined
}

export const ANONYMOUS: RequestIdentity = { role: "anon", userId: "" }

/** What a statement may run for when the caller does not say (SQL_TIMEOUT's default). */
export const DEFAULT_STATEMENT_TIMEOUT = Duration.seconds(15)

export const searchPathFor = (app: AppRef | undefined): string =>
  app === undefined ? "public, pg_catalog" : `${quoteIdentifier(app.schemaName)}, public, pg_catalog`

/**
 * The driver reports a failed ROLLBACK on a connection that died mid-transaction as a defect;
 * for the caller it is what it is, a database failure.
 */
export const connectionLossAsFailure = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError.SqlError, R> =>
  Effect.catchCause(effect, (cause): Effect.Effect<never, E | SqlError.SqlError> => {
    for (const reason of cause.reasons) {
      if (reason._tag === "Die" && SqlError.isSqlError(reason.defect)) return Effect.fail(reason.defect)
    }
    return Effect.failCause(cause)
  })

/**
 * statement_timeout is the server's own: a server that stopped answering (a frozen host) never
 * fires it. So the transaction runs on a fiber of its own and the caller waits at most this long
 * past the statement timeout; a late answer is then a connection failure (503), while the
 * abandoned transaction finishes or fails on its own once the server answers again.
 */
const CLIENT_DEADLINE_MARGIN = Duration.millis(500)

export const withDeadline = <A, E, R>(deadline: Duration.Duration, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError.SqlError, R> =>
  // Started at once, not on the scheduler's next turn: one event-loop hop less per request.
  Effect.flatMap(Effect.forkDetach(effect, { startImmediately: true }), (fiber) =>
    // A timer and an observer rather than a race (Effect.timeout forks two more fibers, ~20 µs a
    // request). Abandoning interrupts without waiting: against a frozen server the rollback
    // itself would hang.
    Effect.callback<A, E | SqlError.SqlError>((resume) => {
      const timer = setTimeout(() => {
        stopWatching()
        fiber.interruptUnsafe()
        resume(Effect.fail(noAnswer()))
      }, Duration.toMillis(deadline))
      const stopWatching = fiber.addObserver((exit) => {
        clearTimeout(timer)
        resume(exit)
      })
      // A caller that goes away (a closed request) still cancels its transaction.
      return Effect.sync(() => {
        clearTimeout(timer)
        stopWatching()
        fiber.interruptUnsafe()
      })
    }))

const noAnswer = () =>
  new SqlError.SqlError({
    reason: new SqlError.ConnectionError({ cause: new Error("no answer"), message: "the database did not answer in time" })
  })

/** Runs `effect` in a transaction as `context`; any failure rolls everything back. */
export const asRequest = <A, E, R>(context: RequestContext, effect: Effect.Effect<A, E, R>) =>
  withDeadline(deadlineOf(context), asTransaction(context, effect))

/**
 * The statement that makes a transaction the caller's (see the top of this file); its parameters
 * come from `settingsOf`.
 */
export const SETTINGS_STATEMENT = `SELECT
  set_config('role', $1, true),
  set_config('app.user_id', $2, true),
  set_config('app.app_id', $3, true),
  set_config('search_path', $4, true),
  set_config('statement_timeout', $5, true),
  set_config('transaction_read_only', $6, true)`

export const settingsOf = (context: RequestContext): ReadonlyArray<string> => [
  context.role,
  context.userId,
  context.app?.id ?? "",
  searchPathFor(context.app),
  `${Math.round(Duration.toMillis(context.statementTimeout ?? DEFAULT_STATEMENT_TIMEOUT))}ms`,
  context.readOnly === true ? "on" : "off"
]

/** How long a caller waits for a transaction as `context`: its statement timeout, plus the margin. */
export const deadlineOf = (context: RequestContext): Duration.Duration =>
  Duration.sum(context.statementTimeout ?? DEFAULT_STATEMENT_TIMEOUT, CLIENT_DEADLINE_MARGIN)

const asTransaction = <A, E, R>(context: RequestContext, effect: Effect.Effect<A, E, R>) =>
  connectionLossAsFailure(Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
    sql.withTransaction(sql.unsafe(SETTINGS_STATEMENT, settingsOf(context)).pipe(Effect.andThen(effect)))))

/** `asRequest` for calls that need only a role and a user (the identity functions). */
export const asIdentity = <A, E, R>(identity: RequestIdentity, effect: Effect.Effect<A, E, R>) => asRequest(identity, effect)
