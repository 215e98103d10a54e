/**
 * X-App-Schema → the app of sys.apps it names. Answers are cached, and the whole cache is dropped
 * whenever sys.apps changes (its trigger notifies `plinth_apps`, which this service listens to).
 * While the LISTEN connection is down, nothing is cached, so a stale answer is never served.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Queue, Schedule } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import type { AppRef } from "./RequestContext.ts"

export const APPS_CHANNEL = "plinth_apps"
/** Schema names as sys.apps admits them; anything else is refused before a query. */
export const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/
const MAX_CACHED = 10_000

export class AppRegistry extends Context.Service<AppRegistry, {
  readonly resolve: (schemaName: string) => Effect.Effect<Option.Option<AppRef>, SqlError.SqlError>
}>()("plinth/AppRegistry") {
  static readonly layer = Layer.effect(AppRegistry, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const pg = yield* PgClient.PgClient
    const cache = new Map<string, Option.Option<AppRef>>()
    let listening = false
    // Bumped on every invalidation: a lookup that raced with a change must not cache its answer.
    let generation = 0
    const invalidate = () => {
      generation++
      cache.clear()
    }

    const follow = Effect.scoped(Effect.gen(function*() {
      const notifications = yield* pg.listen(APPS_CHANNEL)
      invalidate()
      listening = true
      yield* Effect.forever(Effect.andThen(Queue.take(notifications), Effect.sync(invalidate)))
    })).pipe(
      Effect.ensuring(Effect.sync(() => {
        listening = false
        invalidate()
      })),
      Effect.retry(Schedule.spaced("1 second"))
    )
    yield* Effect.forkScoped(follow)

    const lookup = (schemaName: string) =>
      Effect.map(
        sql<{ id: string }>`SELECT id::text AS id FROM sys.apps WHERE schema_name = ${schemaName}`,
        ([row]) => Option.map(Option.fromNullishOr(row), (found): AppRef => ({ id: found.id, schemaName }))
      )

    return AppRegistry.of({
      resolve: Effect.fn("AppRegistry.resolve")(function*(schemaName: string) {
        if (!SCHEMA_NAME.test(schemaName)) return Option.none()
        const cached = cache.get(schemaName)
        if (cached !== undefined) return cached
        const before = generation
        const found = yield* lookup(schemaName)
        if (listening && generation === before) {
          if (cache.size >= MAX_CACHED) cache.clear()
          cache.set(schemaName, found)
        }
        return found
      })
    })
  }))
}
