/**
 * The connections that statements run as a caller go through (POST /sql and /function, the
 * identity functions, the introspection calls, the chat's tools): each is checked out by one
 * request at a time, so that its statements can pipeline. What runs on them, and how, is
 * `AsCaller`'s.
 */
import { PgPool, PgProtocol } from "@effect/sql-pg"
import { Context, Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { CatalogWatch } from "./CatalogWatch.ts"
import { makeResultTypes } from "./JsonColumnTypes.ts"

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
