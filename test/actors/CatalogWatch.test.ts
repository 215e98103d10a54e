/**
 * CatalogWatch (as the tenant's actor provides it from its LISTEN connection) and its caches: an
 * entry counts until the catalog changes, whether another process says so (a notification on
 * plinth_catalog) or this process does (`changed`, at once: a chat step's next prompt must not
 * wait for the notification).
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Exit, Layer, Redacted, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeTenantActor } from "../../src/actors/TenantActor.ts"
import { CATALOG_CHANNEL, type CatalogWatch, makeCatalogCache } from "../../src/services/CatalogWatch.ts"
import { createTestDatabase, type TestDatabase } from "../support/database.ts"
import { eventually } from "../support/eventually.ts"

let db: TestDatabase
const scope = Effect.runSync(Scope.make())
let watch: CatalogWatch["Service"]
let pg: PgClient.PgClient

beforeAll(async () => {
  db = await createTestDatabase()
  const context = await Effect.runPromise(Layer.buildWithScope(PgClient.layer({ url: Redacted.make(db.mainUrl) }), scope))
  const actor = await Effect.runPromise(Scope.provide(scope)(makeTenantActor({ name: "catalog" })).pipe(Effect.provide(context)))
  watch = actor.catalog
  pg = Context.get(context, PgClient.PgClient)
  expect(await eventually(async () => watch.generation() !== undefined, 5_000)).toBe(true)
})
afterAll(async () => {
  await Effect.runPromise(Scope.close(scope, Exit.void))
  await db?.drop()
})

const cached = (value: string) => {
  const cache = makeCatalogCache<string, string>(watch, 10)
  cache.set("key", value, watch.generation())
  expect(cache.get("key")).toBe(value)
  return cache
}

describe("CatalogWatch", () => {
  it("a change this process made ends every cached entry at once", () => {
    const cache = cached("before")
    watch.changed()
    expect(cache.get("key")).toBeUndefined()
  })

  it("an answer read before a change is not stored after it", () => {
    const cache = makeCatalogCache<string, string>(watch, 10)
    const generation = watch.generation()
    watch.changed()
    cache.set("key", "stale", generation)
    expect(cache.get("key")).toBeUndefined()
  })

  it("a notification from elsewhere ends cached entries when it arrives", async () => {
    const cache = cached("before")
    await Effect.runPromise(pg.notify(CATALOG_CHANNEL, ""))
    expect(await eventually(async () => cache.get("key") === undefined, 5_000)).toBe(true)
  })
})
