/**
 * POST / (spec §2.5): the schema as the caller's role sees it, from sys.introspect() and
 * sys.table_stats() (migration 0006). The first is the same for every user of a role and app, so
 * it is cached until the catalog changes; row counts pass through row-level security and are
 * read on every call.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { CatalogWatch, makeCatalogCache } from "./CatalogWatch.ts"
import { asRequest, type RequestContext } from "./RequestContext.ts"

/** Spec §2.5; the shapes inside are those of sys.introspect() (README.md, "Introspection"). */
export interface IntrospectionResult {
  readonly relations: ReadonlyArray<unknown>
  readonly keys: ReadonlyArray<unknown>
  readonly stats: ReadonlyArray<{ readonly relname: string; readonly number_rows: number }>
  readonly table_metadata: Readonly<Record<string, unknown>>
  readonly app_metadata: { readonly app_description: string; readonly home_page: Readonly<Record<string, string>> }
  readonly column_metadata: Readonly<Record<string, unknown>>
  readonly apps: ReadonlyArray<unknown>
  readonly curr_role: string
}

const MAX_CACHED = 1_000

export class Introspection extends Context.Service<Introspection, {
  readonly describe: (context: RequestContext) => Effect.Effect<IntrospectionResult, SqlError.SqlError>
}>()("plinth/Introspection") {
  static readonly layer = Layer.effect(Introspection, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const watch = yield* CatalogWatch
    const cache = makeCatalogCache<string, Omit<IntrospectionResult, "stats">>(watch, MAX_CACHED)

    return Introspection.of({
      describe: Effect.fn("Introspection.describe")(function*(context: RequestContext) {
        const key = `${context.role}:${context.app?.id ?? ""}`
        const cached = cache.get(key)
        const generation = watch.generation()
        return yield* asRequest(context, Effect.gen(function*() {
          const [stats] = yield* sql<{ stats: IntrospectionResult["stats"] }>`SELECT sys.table_stats() AS stats`
          let schema = cached
          if (schema === undefined) {
            const [row] = yield* sql<{ schema: Omit<IntrospectionResult, "stats"> }>`SELECT sys.introspect() AS schema`
            schema = row!.schema
            cache.set(key, schema, generation)
          }
          return { ...schema, stats: stats!.stats } satisfies IntrospectionResult
        })).pipe(Effect.provideService(SqlClient.SqlClient, sql))
      })
    })
  }))
}
