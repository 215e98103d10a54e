/**
 * The connections that statements run as a caller go through (POST /sql and /function, the
 * introspection calls, the chat's tools). Each is checked out by one request at a time and can
 * pipeline, so a request's transaction is not four round trips (BEGIN, the settings statement,
 * the statement, COMMIT) but:
 *
 * - a statement that returns no rows, or one small value: all four in one write, one round trip;
 * - a statement that returns rows: BEGIN and the settings in one write, then the statement with
 *   its rows streamed (the response has a size bound, and a result collected before it is
 *   measured would have none), then COMMIT: three.
 *
 * On this kind of machine loopback round trips are most of a request's cost (docs/benchmarks.md).
 * The order of a pipeline is the order its statements are queued in, and they are queued in the
 * order their fibers start (Effect.all starts them in order; the connection's queue is FIFO), so
 * the statement never runs before the settings: test/sql/Pipelining.test.ts holds that under load.
 */
import { PgPool } from "@effect/sql-pg"
import type { PgConnection } from "@effect/sql-pg"
import { Context, Effect, Exit, Layer, Redacted, Result, type Scope } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { makeJsonColumnTypes } from "./JsonColumnTypes.ts"
import { connectionLossAsFailure, deadlineOf, type RequestContext, SETTINGS_STATEMENT, settingsOf, withDeadline } from "./RequestContext.ts"

export class StatementConnections extends Context.Service<StatementConnections, PgPool.PgPool>()("plinth/StatementConnections") {
  static readonly layer = (url: string, maxConnections: number) =>
    Layer.effect(
      StatementConnections,
      PgPool.make({
        url: Redacted.make(url),
        maxConnections,
        // One request per connection at a time: its statements may pipeline, nobody else's.
        multiplex: true,
        multiplexConcurrency: 1,
        applicationName: "plinth",
        types: makeJsonColumnTypes()
      })
    )
}

type Statement = readonly [text: string, params: ReadonlyArray<unknown>]

/** Queues `statements` in order in one write and waits for all; fails with the first failure in order. */
const pipelined = (connection: PgConnection.PgConnection, statements: ReadonlyArray<Statement>) =>
  Effect.all(statements.map(([text, params]) => Effect.result(connection.query(text, params))), { concurrency: "unbounded" }).pipe(
    Effect.flatMap((results) => {
      for (const result of results) if (Result.isFailure(result)) return Effect.fail(result.failure)
      return Effect.succeed(results.map((result) => (result as Result.Success<PgConnection.Result, SqlError.SqlError>).success))
    })
  )

/**
 * Runs `text` as `context` in one round trip: its result, rows collected. For statements without
 * rows, or whose result is small by construction (one function call's value); a caller's statement
 * that returns rows streams them instead (`withPipelinedTransaction`). Once written, the statement
 * and its COMMIT are in PostgreSQL's hands, so a caller that goes away cancels it from another
 * connection, and the connection is retired first: a late cancel must not reach the statement of
 * whoever would use the connection next.
 */
export const executePipelined = (context: RequestContext, text: string, params: ReadonlyArray<unknown> = []) =>
  withDeadline(
    deadlineOf(context),
    connectionLossAsFailure(Effect.scoped(Effect.gen(function*() {
      const pool = yield* StatementConnections
      const sql = yield* SqlClient.SqlClient
      const connection = yield* pool.get
      // A failed statement turns the COMMIT into a ROLLBACK: the transaction ends either way.
      const [, , result] = yield* pipelined(connection, [["BEGIN", []], [SETTINGS_STATEMENT, settingsOf(context)], [text, params], ["COMMIT", []]]).pipe(
        Effect.onInterrupt(() =>
          Effect.andThen(
            pool.invalidate(connection),
            // Not waited for: against a frozen server it would hang like the statement.
            Effect.forkDetach(Effect.ignore(sql`SELECT plinth.cancel_statement(${connection.processId})`))
          )
        )
      )
      return result!
    })))
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
    connectionLossAsFailure(Effect.scoped(Effect.gen(function*() {
      const pool = yield* StatementConnections
      const connection = yield* pool.get
      return yield* pipelined(connection, [["BEGIN", []], [SETTINGS_STATEMENT, settingsOf(context)]]).pipe(
        Effect.andThen(use(connection)),
        Effect.onExit((exit) => Exit.isSuccess(exit) ? Effect.void : Effect.catch(connection.query("ROLLBACK"), () => pool.invalidate(connection))),
        Effect.tap(() => connection.query("COMMIT"))
      )
    })))
  )
