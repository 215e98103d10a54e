/**
 * POST / (spec §2.5): the schema as the caller's role sees it, from sys.introspect() and
 * sys.table_stats() (sql/sys/07_introspection.sql). The first is the same for every user of a role and app, so
 * it is cached until the catalog changes; row counts pass through row-level security and are
 * read on every call. Each is one pipelined round trip as the caller (AsCaller).
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { CatalogWatch, makeCatalogCache } from "./CatalogWatch.ts"
import type { RequestContext } from "./RequestContext.ts"
import { callPipelined } from "./AsCaller.ts"
import type { StatementConnections } from "./StatementConnections.ts"

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

export type Schema = Omit<IntrospectionResult, "stats">

export class Introspection extends Context.Service<Introspection, {
  /** The schema without row counts (cached): what the chat's model is told. */
  readonly schema: (context: RequestContext) => Effect.Effect<Schema, SqlError.SqlError>
  readonly describe: (context: RequestContext) => Effect.Effect<IntrospectionResult, SqlError.SqlError>
}>()("plinth/Introspection") {
  static readonly layer = Layer.effect(Introspection, Effect.gen(function*() {
    const connections = yield* Effect.context<StatementConnections | SqlClient.SqlClient>()
    const watch = yield* CatalogWatch
    const cache = makeCatalogCache<string, Schema>(watch, MAX_CACHED)
    const valueOf = <A>(context: RequestContext, call: string) =>
      callPipelined(context, call).pipe(Effect.map((value) => value as A), Effect.provideContext(connections))

    const schema = Effect.fn("Introspection.schema")(function*(context: RequestContext) {
      const key = `${context.role}:${context.app?.id ?? ""}`
      const cached = cache.get(key)
      if (cached !== undefined) return cached
      const generation = watch.generation()
      const fresh = yield* valueOf<Schema>(context, "sys.introspect()")
      cache.set(key, fresh, generation)
      return fresh
    })

    return Introspection.of({
      schema,
      describe: Effect.fn("Introspection.describe")(function*(context: RequestContext) {
        const [described, stats] = yield* Effect.all([schema(context), valueOf<IntrospectionResult["stats"]>(context, "sys.table_stats()")], { concurrency: 2 })
        return { ...described, stats } satisfies IntrospectionResult
      })
    })
  }))
}
