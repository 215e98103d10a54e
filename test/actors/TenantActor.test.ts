/**
 * TenantActor under concurrent attach, publish and detach (fast-check), against a real LISTEN
 * connection: the per-user stream limit holds however many attach at once; every subscriber with
 * room gets every later event in order; one without room is let go at once, ended exactly once,
 * and gets nothing more; detaching frees the slot and ends the subscriber once; nothing is left
 * attached at the end. And a tenant stopping while streams come and go: every attach and detach
 * is answered, and every admitted subscriber ends exactly once.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Exit, Layer, Redacted, Scope } from "effect"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeTenantActor, type PageEvent, type Subscriber, type TenantActorShape } from "../../src/actors/TenantActor.ts"
import { createTestDatabase, type TestDatabase } from "../support/database.ts"
import { eventually } from "../support/eventually.ts"

const MAX_PER_USER = 3

interface Probe extends Subscriber {
  readonly slugs: Array<string>
  readonly room: number
  ends: number
}

/** A subscriber that takes `room` page changes, then refuses. */
const probe = (room: number): Probe => {
  const slugs: Array<string> = []
  const self: Probe = {
    slugs,
    room,
    ends: 0,
    offer: (event: PageEvent) => {
      if (slugs.length >= room) return false
      if (event._tag === "PageChange") slugs.push(event.slug)
      return true
    },
    end: () => {
      self.ends++
    }
  }
  return self
}

let db: TestDatabase
/** One actor for all runs (each run leaves nothing attached but the sentinel). */
const scope = Effect.runSync(Scope.make())
let actor: TenantActorShape
let pg: PgClient.PgClient
let pgContext: Context.Context<PgClient.PgClient>
/** Attached first, so published to first: once it has a change, every subscriber has been offered it. */
const sentinel = probe(Number.MAX_SAFE_INTEGER)

beforeAll(async () => {
  db = await createTestDatabase()
  const context = await Effect.runPromise(Layer.buildWithScope(PgClient.layer({ url: Redacted.make(db.mainUrl) }), scope))
  pg = Context.get(context, PgClient.PgClient)
  pgContext = Context.make(PgClient.PgClient, pg)
  actor = await Effect.runPromise(Scope.provide(scope)(makeTenantActor({ name: "property", maxStreamsPerUser: MAX_PER_USER })).pipe(Effect.provide(context)))
  await Effect.runPromise(Scope.provide(scope)(actor.attach("sentinel", sentinel)))
  // The actor's LISTEN is in place once a change reaches the sentinel; once a last one has too, so
  // has every change sent before it (notifications arrive in commit order): none reaches a run.
  const notify = (slug: string) => Effect.runPromise(pg.notify("page_change", `public:${slug}`))
  const warm = await eventually(async () => {
    if (sentinel.slugs.length > 0) return true
    await notify("warm-up")
    return false
  }, 10_000)
  if (!warm) throw new Error("the actor did not start listening")
  await notify("fence")
  if (!(await eventually(async () => sentinel.slugs.includes("fence"), 10_000))) throw new Error("the fence did not arrive")
})
afterAll(async () => {
  await Effect.runPromise(Scope.close(scope, Exit.void))
  await db?.drop()
})

/** Until `done` holds, for at most 10 s (the assertions after it say what did not happen). */
const waitUntil = (done: () => boolean) => Effect.promise(() => eventually(async () => done(), 10_000, 10))

describe("TenantActor (property)", () => {
  it("limits, delivery in order, letting go and detaching hold under concurrent calls", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ user: fc.constantFrom("a", "b", "c"), room: fc.integer({ min: 0, max: 6 }), detachEarly: fc.boolean() }), { minLength: 1, maxLength: 16 }),
        fc.integer({ min: 1, max: 4 }),
        (attaches, changes) =>
          Effect.runPromise(Effect.scoped(Effect.gen(function*() {
            const attached = yield* Effect.forEach(attaches, (attach) =>
              Effect.gen(function*() {
                // A child of the run's scope: a failed run leaves nothing attached for the next.
                const scope = yield* Scope.fork(yield* Effect.scope, "sequential")
                const subscriber = probe(attach.room)
                const exit = yield* Effect.exit(Scope.provide(scope)(actor.attach(attach.user, subscriber)))
                return { ...attach, scope, subscriber, admitted: Exit.isSuccess(exit) }
              }), { concurrency: "unbounded" })

            // The limit: exactly min(asked, MAX_PER_USER) admitted per user.
            for (const user of ["a", "b", "c"]) {
              const asked = attaches.filter((attach) => attach.user === user).length
              expect(attached.filter((entry) => entry.user === user && entry.admitted)).toHaveLength(Math.min(asked, MAX_PER_USER))
            }

            // Some leave before anything is published; they get nothing and are ended once.
            yield* Effect.forEach(attached.filter((entry) => entry.detachEarly), (entry) => Scope.close(entry.scope, Exit.void), { concurrency: "unbounded" })

            const before = sentinel.slugs.length
            const slugs = Array.from({ length: changes }, (_, index) => `p${index}`)
            for (const slug of slugs) yield* pg.notify("page_change", `public:${slug}`)
            const listening = attached.filter((entry) => entry.admitted && !entry.detachEarly)
            yield* waitUntil(() => sentinel.slugs.length === before + changes)

            for (const entry of attached) {
              const { subscriber } = entry
              if (!entry.admitted) {
                expect(subscriber.slugs).toEqual([])
                expect(subscriber.ends).toBe(0)
              } else if (entry.detachEarly) {
                expect(subscriber.slugs).toEqual([])
                expect(subscriber.ends).toBe(1)
              } else {
                expect(subscriber.slugs).toEqual(slugs.slice(0, subscriber.room))
                // Let go at the first event it could not take, and only then.
                expect(subscriber.ends).toBe(subscriber.room < changes ? 1 : 0)
              }
            }
            const stillAttached = listening.filter((entry) => entry.subscriber.room >= changes)
            expect(actor.subscribers()).toBe(stillAttached.length + 1)

            // Everyone leaves at once: each subscriber ended exactly once, no slot held.
            yield* Effect.forEach(attached, (entry) => Scope.close(entry.scope, Exit.void), { concurrency: "unbounded" })
            expect(actor.subscribers()).toBe(1)
            for (const entry of attached) expect(entry.subscriber.ends).toBe(entry.admitted ? 1 : 0)
            for (const user of ["a", "b", "c"]) {
              const again = yield* Effect.forEach(Array.from({ length: MAX_PER_USER }), () => Effect.exit(actor.attach(user, probe(0))))
              expect(again.every(Exit.isSuccess)).toBe(true)
            }
          })))
      ),
      { numRuns: 40 }
    )
  }, 120_000)

  it("a tenant stopping while streams attach and detach: every call is answered, every admitted subscriber ends exactly once", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ user: fc.constantFrom("a", "b"), detach: fc.boolean() }), { minLength: 1, maxLength: 12 }),
        fc.integer({ min: 0, max: 12 }),
        (attaches, stopAt) =>
          Effect.runPromise(Effect.gen(function*() {
            const tenant = yield* Scope.make()
            const stopping = yield* makeTenantActor({ name: "stopping", maxStreamsPerUser: MAX_PER_USER }).pipe(
              Scope.provide(tenant),
              Effect.provide(pgContext)
            )
            const entries = attaches.map((attach) => ({ ...attach, subscriber: probe(0), scope: Scope.makeUnsafe() }))
            // The tenant stops as the stopAt-th stream attaches, while the others attach and some leave.
            const exits = yield* Effect.forEach(entries, (entry, index) =>
              Effect.gen(function*() {
                if (index === stopAt) yield* Scope.close(tenant, Exit.void)
                const exit = yield* Effect.exit(Scope.provide(entry.scope)(stopping.attach(entry.user, entry.subscriber)))
                if (entry.detach) yield* Scope.close(entry.scope, Exit.void)
                return exit
              }), { concurrency: "unbounded" })
            yield* Scope.close(tenant, Exit.void)
            yield* Effect.forEach(entries, (entry) => Scope.close(entry.scope, Exit.void))
            entries.forEach((entry, index) => expect(entry.subscriber.ends).toBe(Exit.isSuccess(exits[index]!) ? 1 : 0))
            expect(stopping.subscribers()).toBe(0)
          }))
      ),
      { numRuns: 20 }
    )
  }, 120_000)
})
