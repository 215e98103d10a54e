/**
 * Runs statements as the caller: the one path for every statement that runs with a caller's role
 * (POST /sql and /function, sign-in and the other identity functions, introspection, the chat's
 * tools). Each is a transaction of its own on a connection of `StatementConnections`, checked out
 * by one request at a time, whose first statement makes it the caller's (RequestContext's
 * `SETTINGS_STATEMENT`). The transaction is pipelined, so it is not four round trips (BEGIN, the
 * settings, the statement, COMMIT) but:
 *
 * - a statement that returns no rows, or one small value: all four in one write, one round trip
 *   (`executePipelined`, `callPipelined`);
 * - a SELECT of at most one row: the same, read-only and limited to two rows (`peekPipelined`),
 *   and the chat's select_data, limited to its row bound (`selectPipelined`);
 * - any other statement that returns rows: BEGIN and the settings in one write, then the
 *   statement with its rows streamed (the response has a size bound, and a result collected
 *   before it is measured would have none), then COMMIT: three (`withPipelinedTransaction`).
 *
 * Every one has a deadline (its statement timeout plus a margin, for a server that stops
 * answering), and a caller that goes away has its written statement cancelled from another
 * connection. The order of a pipeline is the order its statements are queued in, and they are
 * queued in the order their fibers start (Effect.all starts them in order; the connection's queue
 * is FIFO), so the statement never runs before the settings: test/sql/Pipelining.test.ts holds that
 * under load.
 */
import type { PgConnection } from "@effect/sql-pg"
import { type Context, Duration, Effect, Exit, Fiber, Option, type Scope } from "effect"
import { constVoid } from "effect/Function"
import { SqlClient, SqlError } from "effect/sql"
import { databaseErrorFields } from "./DatabaseError.ts"
import { type RequestContext, SETTINGS_STATEMENT, settingsOf, statementTimeoutMillis } from "./RequestContext.ts"
import { StatementConnections } from "./StatementConnections.ts"

/** A statement and its parameters. */
type Statement = readonly [text: string, params: ReadonlyArray<unknown>]

/**
 * The driver reports a failed ROLLBACK on a connection that died mid-transaction as a defect;
 * for the caller it is what it is, a database failure.
 */
const connectionLossAsFailure = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError.SqlError, R> =>
  Effect.catchCause(effect, (cause): Effect.Effect<never, E | SqlError.SqlError> => {
    for (const reason of cause.reasons) {
      if (reason._tag === "Die" && SqlError.isSqlError(reason.defect)) return Effect.fail(reason.defect)
    }
    return Effect.failCause(cause)
  })

/**
 * statement_timeout is the server's own: a server that stopped answering (a frozen host) never
 * fires it. So a caller waits at most this long past the statement timeout (`allUntil`); a late
 * answer is then a connection failure (503), while the abandoned transaction finishes or fails on
 * its own once the server answers again.
 */
const CLIENT_DEADLINE_MARGIN_MS = 500

/** Until when (a `performance.now()` time) a caller waits for a transaction as `context` that starts now. */
const deadlineOf = (context: RequestContext): number => performance.now() + statementTimeoutMillis(context) + CLIENT_DEADLINE_MARGIN_MS

/**
 * Runs `effects` on fibers of their own, started at once and in order (so statements queue in
 * order on the connection), and waits for all of them until `until`: their values, or the first
 * failure in order. Past the deadline they are interrupted without waiting (against a frozen
 * server their rollback would hang), `late` starts on a fiber of its own, and the caller fails
 * with `noAnswer` at once. A timer and observers rather than a race: Effect.timeout forks two
 * more fibers per call.
 */
const allUntil = <A, E, R>(
  until: number,
  effects: ReadonlyArray<Effect.Effect<A, E, R>>,
  late: Effect.Effect<void, never, R> = Effect.void
): Effect.Effect<Array<A>, E | SqlError.SqlError, R> =>
  Effect.withFiber((parent) => {
    const run = Effect.runForkWith(parent.context as Context.Context<R>)
    const fibers = effects.map((effect) => run(effect))
    const exits = fibers.map((fiber) => fiber.pollUnsafe())
    if (exits.every((exit) => exit !== undefined)) return collected(exits)
    return Effect.callback<Array<A>, E | SqlError.SqlError>((resume) => {
      let pending = exits.filter((exit) => exit === undefined).length
      const timer = setTimeout(() => {
        for (const stop of stops) stop()
        for (const fiber of fibers) fiber.interruptUnsafe()
        run(late)
        resume(Effect.fail(noAnswer()))
      }, Math.max(0, until - performance.now()))
      const stops = fibers.map((fiber, index) =>
        exits[index] !== undefined ? constVoid : fiber.addObserver((exit) => {
          exits[index] = exit
          if (--pending > 0) return
          clearTimeout(timer)
          resume(collected(exits))
        }))
      // A caller that goes away (a closed request) still cancels its transaction, and waits a
      // bounded while for it to let go of its connection, so that what the caller holds (its
      // per-user statement permit) is not free again while its statement still runs.
      return Effect.suspend(() => {
        clearTimeout(timer)
        for (const stop of stops) stop()
        return Effect.asVoid(Effect.timeoutOption(Fiber.interruptAll(fibers), ABANDON_WAIT))
      })
    })
  })

/** The values of `exits`, all done, or the first failure in order. */
const collected = <A, E>(exits: ReadonlyArray<Exit.Exit<A, E> | undefined>): Effect.Effect<Array<A>, E> => {
  const values: Array<A> = []
  for (const exit of exits) {
    if (Exit.isFailure(exit!)) return exit as Exit.Exit<never, E>
    values.push(exit!.value)
  }
  return Effect.succeed(values)
}

/** How long a caller that went away waits for its transaction to end: the cancel's own wait and a margin. */
const ABANDON_WAIT = Duration.seconds(2)

const noAnswer = () =>
  new SqlError.SqlError({
    reason: new SqlError.ConnectionError({ cause: new Error("no answer"), message: "the database did not answer in time" })
  })

/** Queues `statements` on `connection` in order (one write) and waits for all until `until`. */
const pipelined = (until: number, connection: PgConnection.PgConnection, statements: ReadonlyArray<Statement>, late?: Effect.Effect<void>) =>
  allUntil(until, statements.map(([text, params]) => connection.query(text, params)), late)

const CANCEL_WAIT = Duration.seconds(1)
const BEGIN: Statement = ["BEGIN", []]
const COMMIT: Statement = ["COMMIT", []]

/**
 * Runs `statements` as `context` in one round trip, in a transaction of their own: their results,
 * rows collected. Once written, they and their COMMIT are in PostgreSQL's hands, so a caller that
 * goes away, or whose deadline passes, cancels them from another connection, and the connection is
 * retired first: a late cancel must not reach the statement of whoever would use the connection next.
 */
const inOneRoundTrip = (context: RequestContext, statements: ReadonlyArray<Statement>) =>
  connectionLossAsFailure(Effect.scoped(roundTrip(context, statements)))

// Defined once, not a generator written inline per call (docs/performance-notes.md says why).
const roundTrip = Effect.fnUntraced(function*(context: RequestContext, statements: ReadonlyArray<Statement>) {
  const until = deadlineOf(context)
  const pool = yield* StatementConnections
  const sql = yield* SqlClient.SqlClient
  const [connection] = yield* allUntil(until, [pool.get])
  const abandon = Effect.suspend(() =>
    Effect.andThen(
      pool.invalidate(connection!),
      // Briefly: against a frozen server it would hang like the statement.
      Effect.ignore(Effect.timeout(Effect.interruptible(sql`SELECT plinth.cancel_statement(${connection!.processId})`), CANCEL_WAIT))
    )
  )
  // A failed statement turns the COMMIT into a ROLLBACK: the transaction ends either way.
  const results = yield* pipelined(until, connection!, [BEGIN, [SETTINGS_STATEMENT, settingsOf(context)], ...statements, COMMIT], abandon).pipe(
    // Waited for when the caller goes away (a process shutting down must not exit before it is sent).
    Effect.onInterrupt(() => abandon)
  )
  return results.slice(2, -1)
})

/**
 * Runs `text` as `context` in one round trip: its result, rows collected. For statements without
 * rows, or whose result is small by construction (one function call's value); a caller's statement
 * that returns rows streams them instead (`withPipelinedTransaction`), or is peeked at first.
 */
export const executePipelined = (context: RequestContext, text: string, params: ReadonlyArray<unknown> = []) =>
  Effect.map(inOneRoundTrip(context, [[text, params]]), ([result]) => result!)

/** Runs `statements` as `context` in one round trip and one transaction: their results, or the first failure. */
export const executeAllPipelined = (context: RequestContext, statements: ReadonlyArray<Statement>) => inOneRoundTrip(context, statements)

/** The value of `call` (one function call, `sys.introspect()`) as `context`, in one round trip. */
export const callPipelined = (context: RequestContext, call: string, params: ReadonlyArray<unknown> = []) =>
  Effect.map(executePipelined(context, `SELECT ${call} AS value`, params), (result): unknown => result.rows[0]?.["value"] ?? null)

/** A write in a read-only transaction: the peek's "this SELECT writes". */
const READ_ONLY_SQL_TRANSACTION = "25006"

/** What `selectPipelined` puts before the caller's text. */
const SELECT_WRAPPER = "SELECT * FROM ("

/**
 * A SELECT's first `limit` rows in one round trip: run as a subquery with a LIMIT, in a read-only
 * transaction (a SELECT that writes fails). `text` is one SELECT, passed by the guard: it reads as
 * a subquery (the newline ends a trailing comment; a trailing semicolon would not parse inside the
 * parentheses). The wrapper is a prepared statement like any other, so a repeated one is planned
 * once. Error positions are the caller's text's (`callersPosition`).
 */
export const selectPipelined = (context: RequestContext, text: string, params: ReadonlyArray<unknown>, limit: number) =>
  readOnlyPipelined(context, SELECT_WRAPPER, text, `\n) AS plinth_rows LIMIT ${limit}`, params)

/** `text` between `before` and `after`, in a read-only transaction of one round trip: its rows. */
const readOnlyPipelined = (context: RequestContext, before: string, text: string, after: string, params: ReadonlyArray<unknown>) =>
  inOneRoundTrip({ ...context, readOnly: true }, [[`${before}${text.replace(/;\s*$/, "")}${after}`, params]]).pipe(
    Effect.map(([result]) => result!.rows),
    Effect.mapError((error) => callersPosition(error, before.length, text.length))
  )

/**
 * An error of the wrapped statement, its position moved into the caller's text (none where it
 * points at the wrapper). The error object is this failure's own: the driver builds one per
 * error response.
 */
const callersPosition = (error: SqlError.SqlError, wrapperLength: number, textLength: number): SqlError.SqlError => {
  const cause: unknown = (error.reason as { readonly cause?: unknown }).cause
  if (typeof cause !== "object" || cause === null) return error
  const fields = cause as { position?: unknown }
  if (typeof fields.position !== "string") return error
  const position = Number(fields.position) - wrapperLength
  fields.position = position >= 1 && position <= textLength + 1 ? String(position) : undefined
  return error
}

/** How many rows a peek reads: one to keep, and a second to learn that there are more. */
const PEEK_ROWS = 2

/**
 * A SELECT's rows in one round trip, if it reads at most one row (`selectPipelined`). `None` when
 * it has to go the long way (its rows streamed, in a transaction that may write): it has a second
 * row, or it writes (the read-only transaction refused). Any other failure is the caller's answer
 * at once: running the statement again would run whatever it did before failing a second time.
 */
export const peekPipelined = (context: RequestContext, text: string, params: ReadonlyArray<unknown>) =>
  selectPipelined(context, text, params, PEEK_ROWS).pipe(
    Effect.map((rows) => rows.length < PEEK_ROWS ? Option.some(rows) : Option.none()),
    longWayIfWriting
  )

/** A SELECT that writes (refused by the read-only transaction) goes the long way. */
const longWayIfWriting = <A, R>(effect: Effect.Effect<Option.Option<A>, SqlError.SqlError, R>) =>
  Effect.catchTag(effect, "SqlError", (error) =>
    databaseErrorFields(error).code === READ_ONLY_SQL_TRANSACTION ? Effect.succeed(Option.none<A>()) : Effect.fail(error))

/** The column of a bounded read that carries the running size of its rows; taken off each row. */
const SIZE_COLUMN = "plinth peek bytes"

/**
 * What `boundedPipelined` puts around the caller's text: its first rows, each with the running sum
 * of the rows' sizes (`pg_column_size` of the row), cut after the first row that takes the sum past
 * the budget. The rows are expanded back into the caller's own columns, with their own types.
 */
const BOUNDED_BEFORE = "SELECT (plinth_sized.plinth_row).*, plinth_sized.plinth_total AS \"plinth peek bytes\" FROM (" +
  "SELECT plinth_measured.plinth_row, plinth_measured.plinth_size, sum(plinth_measured.plinth_size) OVER (ROWS UNBOUNDED PRECEDING) AS plinth_total " +
  "FROM (SELECT plinth_row, pg_column_size(plinth_row) AS plinth_size FROM (SELECT * FROM ("
const boundedAfter = (rows: number, bytes: number) =>
  `\n) AS plinth_rows LIMIT ${rows}) AS plinth_row) AS plinth_measured) AS plinth_sized ` +
  `WHERE plinth_sized.plinth_total - plinth_sized.plinth_size <= ${bytes}`

/**
 * A SELECT's rows in one round trip, as a prepared statement (planned once), if it reads at most
 * `rows` rows of at most `bytes` together; `None` when it has more or larger rows, or writes: it
 * goes the long way then. What is held in memory is bounded by the budget and one row, as the
 * long way's stream is, which a plain LIMIT would not be (rows can be as large as a response).
 */
export const boundedPipelined = (context: RequestContext, text: string, params: ReadonlyArray<unknown>, rows: number, bytes: number) =>
  readOnlyPipelined(context, BOUNDED_BEFORE, text, boundedAfter(rows + 1, bytes), params).pipe(
    Effect.map((read) => {
      const last = read[read.length - 1]
      if (read.length > rows || (last !== undefined && Number(last[SIZE_COLUMN]) > bytes)) return Option.none()
      // The last column added to each row: deleting it keeps the row's shape fast.
      for (const row of read) delete (row as Record<string, unknown>)[SIZE_COLUMN]
      return Option.some(read)
    }),
    longWayIfWriting
  )

/**
 * Runs `use` with a connection in a transaction as `context` (BEGIN and the settings in one round
 * trip); commits when it succeeds, rolls back otherwise (a connection that cannot is retired).
 */
export const withPipelinedTransaction = <A, E, R>(
  context: RequestContext,
  use: (connection: PgConnection.PgConnection) => Effect.Effect<A, E, R>
): Effect.Effect<A, E | SqlError.SqlError, Exclude<R, Scope.Scope> | StatementConnections> =>
  Effect.suspend(() => {
    const until = deadlineOf(context)
    const transaction = Effect.scoped(Effect.flatMap(Effect.service(StatementConnections), (pool) =>
      Effect.flatMap(pool.get, (connection) =>
        pipelined(until, connection, [BEGIN, [SETTINGS_STATEMENT, settingsOf(context)]]).pipe(
          Effect.andThen(use(connection)),
          Effect.onExit((exit) => Exit.isSuccess(exit) ? Effect.void : Effect.catch(connection.query("ROLLBACK"), () => pool.invalidate(connection))),
          Effect.tap(() => connection.query("COMMIT"))
        ))))
    return Effect.map(allUntil(until, [connectionLossAsFailure(transaction)]), ([result]) => result!)
  })
