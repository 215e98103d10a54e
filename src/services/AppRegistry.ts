/**
 * X-App-Schema → the app of sys.apps it names, cached until the catalog changes (CatalogWatch).
 */
import { Context, Effect, Layer, Option } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { CatalogWatch, makeCatalogCache } from "./CatalogWatch.ts"
import type { AppRef } from "./RequestContext.ts"
import { PLAIN_NAME } from "./SqlIdentifier.ts"

const MAX_CACHED = 10_000

export class AppRegistry extends Context.Service<AppRegistry, {
  readonly resolve: (schemaName: string) => Effect.Effect<Option.Option<AppRef>, SqlError.SqlError>
}>()("plinth/AppRegistry") {
  static readonly layer = Layer.effect(AppRegistry, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const watch = yield* CatalogWatch
    const cache = makeCatalogCache<string, Option.Option<AppRef>>(watch, MAX_CACHED)

    return AppRegistry.of({
      resolve: Effect.fn("AppRegistry.resolve")(function*(schemaName: string) {
        // Anything sys.apps would not admit is refused before a query.
        if (!PLAIN_NAME.test(schemaName)) return Option.none()
        const cached = cache.get(schemaName)
        if (cached !== undefined) return cached
        const generation = watch.generation()
        const [row] = yield* sql<{ id: string }>`SELECT id::text AS id FROM sys.apps WHERE schema_name = ${schemaName}`
        const found = Option.map(Option.fromNullishOr(row), (app): AppRef => ({ id: app.id, schemaName }))
        cache.set(schemaName, found, generation)
        return found
      })
    })
  }))
}
