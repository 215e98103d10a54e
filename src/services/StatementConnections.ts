/**
 * The connections that statements run as a caller go through (POST /sql and /function, the
 * introspection calls, the chat's tools). Each is checked out by one request at a time and can
 * pipeline, so a request's transaction is not four round trips (BEGIN, the settings statement,
 * the statement, COMMIT) but:
 *
 * - a statement that returns no rows, or one small value: all four in one write, one round trip;
 * - a SELECT of at most one row: the same, read-only and limited to two rows (`peekPipelined`),
 *   and the chat's select_data, limited to its row bound (`selectPipelined`);
 * - any other statement that returns rows: BEGIN and the settings in one write, then the
 *   statement with its rows streamed (the response has a size bound, and a result collected
 *   before it is measured would have none), then COMMIT: three.
 *
 * On this kind of machine loopback round trips are most of a request's cost (docs/benchmarks.md).
 * The order of a pipeline is the order its statements are queued in, and they are queued in the
 * order their fibers start (Effect.all starts them in order; the connection's queue is FIFO), so
 * the statement never runs before the settings: test/sql/Pipelining.test.ts holds that under load.
 */
import { PgPool, PgProtocol } from "@effect/sql-pg"
import type { PgConnection } from "@effect/sql-pg"
import { Context, Duration, Effect, Exit, Layer, Option, Redacted, Result, type Scope } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { databaseErrorFields } from "./DatabaseError.ts"
import { CatalogWatch } from "./CatalogWatch.ts"
import { makeResultTypes } from "./JsonColumnTypes.ts"
import { connectionLossAsFailure, deadlineOf, type RequestContext, SETTINGS_STATEMENT, settingsOf, withDeadline } from "./RequestContext.ts"

export class StatementConnections extends Context.Service<StatementConnections, PgPool.PgPool>()("plinth/StatementConnections") {
  /** `maxResponseBytes`: a result row may be as large as a response (the driver's own limit is 16 MiB). */
  static readonly layer = (url: string, maxConnections: number, maxResponseBytes: number) =>
    Layer.effect(
      StatementConnections,
      Effect.gen(function*() {
        const types = makeResultTypes(yield* SqlClient.SqlClient, yield* CatalogWatch)
        const pool = yield* PgPool.make({
          url: Redacted.make(url),
          maxConnections,
          // One request per connection at a time: its statements may pipeline, nobody else's.
          multiplex: true,
          multiplexConcurrency: 1,
          applicationName: "plinth",
          types: types.registry,
          maxMessageSize: Math.max(PgProtocol.defaultMaxMessageSize, maxResponseBytes)
        })
        // Result columns of a type made since the last checkout decode by the catalog as it is now.
        return StatementConnections.of({
          ...pool,
          get: Effect.andThen(types.current, pool.get),
          reserve: Effect.andThen(types.current, pool.reserve),
          use: (f) => Effect.andThen(types.current, pool.use(f))
        })
      })
    )
}

/** A statement and its parameters. */
type Statement = readonly [text: string, params: ReadonlyArray<unknown>]

/** Queues `statements` in order in one write and waits for all; fails with the first failure in order. */
const pipelined = (connection: PgConnection.PgConnection, statements: ReadonlyArray<Statement>) =>
  Effect.all(statements.map(([text, params]) => Effect.result(connection.query(text, params))), { concurrency: "unbounded" }).pipe(
    Effect.flatMap((results) => {
      for (const result of results) if (Result.isFailure(result)) return Effect.fail(result.failure)
      return Effect.succeed(results.map((result) => (result as Result.Success<PgConnection.Result, SqlError.SqlError>).success))
    })
  )

const CANCEL_WAIT = Duration.seconds(1)

/**
 * Runs `statements` as `context` in one round trip, in a transaction of their own: their results,
 * rows collected. Once written, they and their COMMIT are in PostgreSQL's hands, so a caller that
 * goes away cancels them from another connection, and the connection is retired first: a late
 * cancel must not reach the statement of whoever would use the connection next.
 */
const inOneRoundTrip = (context: RequestContext, statements: ReadonlyArray<Statement>) =>
  withDeadline(deadlineOf(context), connectionLossAsFailure(Effect.scoped(roundTrip(context, statements))))

// Defined once, not a generator written inline per call: a generator function created per call
// gets a prototype of its own, which V8's minor GC keeps alive with everything the call's
// closure holds (the whole request), so every request was promoted to the old generation
// (README, Performance).
const roundTrip = Effect.fnUntraced(function*(context: RequestContext, statements: ReadonlyArray<Statement>) {
  const pool = yield* StatementConnections
  const sql = yield* SqlClient.SqlClient
  const connection = yield* pool.get
  // A failed statement turns the COMMIT into a ROLLBACK: the transaction ends either way.
  const results = yield* pipelined(connection, [["BEGIN", []], [SETTINGS_STATEMENT, settingsOf(context)], ...statements, ["COMMIT", []]]).pipe(
    Effect.onInterrupt(() =>
      Effect.andThen(
        pool.invalidate(connection),
        // Waited for (a process shutting down must not exit before it is sent), but briefly:
        // against a frozen server it would hang like the statement.
        Effect.ignore(Effect.timeout(Effect.interruptible(sql`SELECT plinth.cancel_statement(${connection.processId})`), CANCEL_WAIT))
      )
    )
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
  inOneRoundTrip({ ...context, readOnly: true }, [[`${SELECT_WRAPPER}${text.replace(/;\s*$/, "")}\n) AS plinth_rows LIMIT ${limit}`, params]]).pipe(
    Effect.map(([result]) => result!.rows),
    Effect.mapError((error) => callersPosition(error, text.length))
  )

/**
 * An error of the wrapped statement, its position moved into the caller's text (none where it
 * points at the wrapper). The error object is this failure's own: the driver builds one per
 * error response.
 */
const callersPosition = (error: SqlError.SqlError, textLength: number): SqlError.SqlError => {
  const cause: unknown = (error.reason as { readonly cause?: unknown }).cause
  if (typeof cause !== "object" || cause === null) return error
  const fields = cause as { position?: unknown }
  if (typeof fields.position !== "string") return error
  const position = Number(fields.position) - SELECT_WRAPPER.length
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
    Effect.catchTag("SqlError", (error) =>
      databaseErrorFields(error).code === READ_ONLY_SQL_TRANSACTION ? Effect.succeed(Option.none()) : Effect.fail(error))
  )

/**
 * Runs `use` with a connection in a transaction as `context` (BEGIN and the settings in one round
 * trip); commits when it succeeds, rolls back otherwise (a connection that cannot is retired).
 */
export const withPipelinedTransaction = <A, E, R>(
  context: RequestContext,
  use: (connection: PgConnection.PgConnection) => Effect.Effect<A, E, R>
): Effect.Effect<A, E | SqlError.SqlError, Exclude<R, Scope.Scope> | StatementConnections> =>
  withDeadline(
    deadlineOf(context),
    connectionLossAsFailure(Effect.scoped(Effect.flatMap(Effect.service(StatementConnections), (pool) =>
      Effect.flatMap(pool.get, (connection) =>
        pipelined(connection, [["BEGIN", []], [SETTINGS_STATEMENT, settingsOf(context)]]).pipe(
          Effect.andThen(use(connection)),
          Effect.onExit((exit) => Exit.isSuccess(exit) ? Effect.void : Effect.catch(connection.query("ROLLBACK"), () => pool.invalidate(connection))),
          Effect.tap(() => connection.query("COMMIT"))
        )))))
  )
