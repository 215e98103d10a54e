/**
 * Tells caches when the catalog changed: sys.apps and every sys management function notify
 * `plinth_catalog`, and the tenant's actor (src/actors/TenantActor.ts) hears it on the tenant's one
 * LISTEN connection and provides this service. A cached answer is good while the generation it was
 * read at is current; while the LISTEN connection is down there is no current generation, so
 * nothing cached is trusted.
 */
import { Context, Effect } from "effect"

export const CATALOG_CHANNEL = "plinth_catalog"

export class CatalogWatch extends Context.Service<CatalogWatch, {
  /** The current generation, or undefined while changes cannot be heard. */
  readonly generation: () => number | undefined
  /**
   * This process changed the catalog: its own notification arrives a moment later, and a read
   * before then must not be answered from the cache.
   */
  readonly changed: () => void
}>()("plinth/CatalogWatch") {}

/**
 * `effect`, which changes the catalog (a sys function called as the caller), and once it has
 * committed, this process's caches end: the caller's next request, or the chat's next prompt, must
 * not be answered from before the change while its own notification is still on its way.
 */
export const changingCatalog = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R | CatalogWatch> =>
  Effect.tap(effect, () => CatalogWatch.useSync((watch) => watch.changed()))

/** A map whose entries count only for the catalog generation they were read in. */
export const makeCatalogCache = <K, V>(watch: CatalogWatch["Service"], maxEntries: number) => {
  const entries = new Map<K, { readonly generation: number; readonly value: V }>()
  return {
    get: (key: K): V | undefined => {
      const entry = entries.get(key)
      return entry !== undefined && entry.generation === watch.generation() ? entry.value : undefined
    },
    /** Stores `value` if the catalog did not change since `generation` (read before the lookup). */
    set: (key: K, value: V, generation: number | undefined) => {
      if (generation === undefined || generation !== watch.generation()) return
      if (entries.size >= maxEntries) entries.clear()
      entries.set(key, { generation, value })
    }
  }
}
