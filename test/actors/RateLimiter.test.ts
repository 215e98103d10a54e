/**
 * The magic-link rate limits of spec §8 (3 per mailbox, 10 per client address, per 15 minutes),
 * the Retry-After arithmetic, the memory bound, shutdown, and property tests: concurrent batches
 * on a moving TestClock checked against the limits' invariants, and single requests checked
 * against a reference model.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Duration, Effect, Exit, Fiber, Scope } from "effect"
import { TestClock } from "effect/testing"
import fc from "fast-check"
import {
  CLIENT_ADDRESS_RULE,
  MAILBOX_RULE,
  magicLinkKeys,
  makeRateLimiter,
  normalizeMailbox,
  type RateLimitKey,
  RateLimited,
  RateLimiter,
  type RateLimiterShape,
  type RateLimitRule
} from "../../src/actors/RateLimiter.ts"

const WINDOW_MS = 15 * 60_000

/** "ok", or the Retry-After seconds of the refusal. */
const outcome = (limiter: RateLimiterShape, keys: ReadonlyArray<RateLimitKey>) =>
  limiter.check(keys).pipe(
    Effect.as("ok" as const),
    Effect.catchTag("RateLimited", (e) => Effect.succeed(e.retryAfterSeconds))
  )

const magicLink = (limiter: RateLimiterShape, email: string, address = "192.0.2.1") =>
  outcome(limiter, magicLinkKeys(email, address))

describe("normalizeMailbox", () => {
  it("lower-cases, drops dots and the +tag suffix of the local part only", () => {
    assert.strictEqual(normalizeMailbox("A.b+x@D.com"), "ab@d.com")
    assert.strictEqual(normalizeMailbox("ab@d.com"), "ab@d.com")
    assert.strictEqual(normalizeMailbox("first.last+a+b@mail.example.org"), "firstlast@mail.example.org")
    assert.strictEqual(normalizeMailbox("+only@d.com"), "@d.com")
  })

  it("keys a magic-link request by mailbox and by address", () => {
    assert.deepStrictEqual(magicLinkKeys("A.b+x@D.com", "2001:db8::1"), [
      { key: "mailbox:ab@d.com", rule: MAILBOX_RULE },
      { key: "address:2001:db8::1", rule: CLIENT_ADDRESS_RULE }
    ])
    assert.strictEqual(MAILBOX_RULE.limit, 3)
    assert.strictEqual(CLIENT_ADDRESS_RULE.limit, 10)
    assert.strictEqual(Duration.toMillis(MAILBOX_RULE.window), WINDOW_MS)
    assert.strictEqual(Duration.toMillis(CLIENT_ADDRESS_RULE.window), WINDOW_MS)
  })
})

describe("RateLimiter", () => {
  it.effect("3 per mailbox, shared by its spellings; other mailboxes are unaffected", () =>
    Effect.gen(function*() {
      const limiter = yield* makeRateLimiter()
      assert.strictEqual(yield* magicLink(limiter, "a.b+x@d.com", "192.0.2.1"), "ok")
      assert.strictEqual(yield* magicLink(limiter, "AB@D.COM", "192.0.2.2"), "ok")
      assert.strictEqual(yield* magicLink(limiter, "ab+y@d.com", "192.0.2.3"), "ok")
      assert.strictEqual(yield* magicLink(limiter, "ab@d.com", "192.0.2.4"), 900)
      assert.strictEqual(yield* magicLink(limiter, "other@d.com", "192.0.2.1"), "ok")
    }))

  it.effect("10 per client address across mailboxes; the 11th is refused even for a fresh mailbox", () =>
    Effect.gen(function*() {
      const limiter = yield* makeRateLimiter()
      for (let i = 0; i < 10; i++) {
        assert.strictEqual(yield* magicLink(limiter, `user${i}@d.com`, "198.51.100.7"), "ok")
      }
      assert.strictEqual(yield* magicLink(limiter, "fresh@d.com", "198.51.100.7"), 900)
      assert.strictEqual(yield* magicLink(limiter, "fresh@d.com", "198.51.100.8"), "ok")
    }))

  it.effect("a refused request counts nothing", () =>
    Effect.gen(function*() {
      const limiter = yield* makeRateLimiter()
      for (let i = 0; i < 10; i++) yield* magicLink(limiter, `user${i}@d.com`, "198.51.100.7")
      // Refused by the full address three times: the mailbox bucket must not have grown.
      for (let i = 0; i < 3; i++) {
        assert.strictEqual(yield* magicLink(limiter, "victim@d.com", "198.51.100.7"), 900)
      }
      for (let i = 0; i < 3; i++) {
        assert.strictEqual(yield* magicLink(limiter, "victim@d.com", `203.0.113.${i}`), "ok")
      }
      assert.strictEqual(yield* magicLink(limiter, "victim@d.com", "203.0.113.9"), 900)
    }))

  it.effect("Retry-After is the whole seconds until the oldest admission leaves the window", () =>
    Effect.gen(function*() {
      const limiter = yield* makeRateLimiter()
      yield* magicLink(limiter, "ab@d.com") // t = 0
      yield* TestClock.adjust("60 seconds")
      yield* magicLink(limiter, "ab@d.com") // t = 60 s
      yield* TestClock.adjust("60 seconds")
      yield* magicLink(limiter, "ab@d.com") // t = 120 s
      yield* TestClock.adjust("180 seconds")
      assert.strictEqual(yield* magicLink(limiter, "ab@d.com"), 600) // t = 300 s: 900 - 300
      yield* TestClock.adjust(Duration.millis(600_000 - 1_500))
      assert.strictEqual(yield* magicLink(limiter, "ab@d.com"), 2) // 1.5 s left rounds up
      yield* TestClock.adjust(Duration.millis(1_499))
      assert.strictEqual(yield* magicLink(limiter, "ab@d.com"), 1) // 1 ms left: at least 1
      yield* TestClock.adjust(Duration.millis(1)) // t = 900 s: the t = 0 admission has left (t-15min, t]
      assert.strictEqual(yield* magicLink(limiter, "ab@d.com"), "ok")
      // Full again; the next slot frees when the t = 60 s admission leaves, at 960 s.
      assert.strictEqual(yield* magicLink(limiter, "ab@d.com"), 60)
    }))

  it.effect("Retry-After is the longest wait over the full keys", () =>
    Effect.gen(function*() {
      const limiter = yield* makeRateLimiter()
      for (let i = 0; i < 10; i++) yield* magicLink(limiter, `u${i}@d.com`, "192.0.2.50") // address full at t = 0
      yield* TestClock.adjust("5 minutes")
      for (let i = 0; i < 3; i++) yield* magicLink(limiter, "late@d.com", `192.0.2.${60 + i}`) // mailbox full at 5 min
      assert.strictEqual(yield* magicLink(limiter, "late@d.com", "192.0.2.50"), 900) // mailbox: 900 s; address: 600 s
    }))

  it.effect("the same key twice in one request counts once; no keys admits", () =>
    Effect.gen(function*() {
      const limiter = yield* makeRateLimiter()
      const rule: RateLimitRule = { limit: 2, window: Duration.minutes(1) }
      assert.strictEqual(yield* outcome(limiter, [{ key: "k", rule }, { key: "k", rule }]), "ok")
      assert.strictEqual(yield* outcome(limiter, [{ key: "k", rule }]), "ok")
      assert.strictEqual(yield* outcome(limiter, [{ key: "k", rule }]), 60)
      assert.strictEqual(yield* outcome(limiter, []), "ok")
    }))

  it.effect("the refusal is a RateLimited error", () =>
    Effect.gen(function*() {
      const limiter = yield* makeRateLimiter()
      const keys = [{ key: "k", rule: { limit: 1, window: Duration.seconds(30) } }]
      yield* limiter.check(keys)
      const error = yield* Effect.flip(limiter.check(keys))
      assert.instanceOf(error, RateLimited)
      assert.strictEqual(error._tag, "RateLimited")
      assert.strictEqual(error.retryAfterSeconds, 30)
    }))

  it.effect("RateLimiter.layer provides the service", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter
      for (let i = 0; i < 3; i++) yield* limiter.check(magicLinkKeys("x@d.com", "192.0.2.1"))
      const error = yield* Effect.flip(limiter.check(magicLinkKeys("x@d.com", "192.0.2.1")))
      assert.strictEqual(error.retryAfterSeconds, 900)
    }).pipe(Effect.provide(RateLimiter.layer)))

  it.effect("closing the scope stops the actor: a later check is interrupted, not left waiting", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const limiter = yield* makeRateLimiter().pipe(Scope.provide(scope))
      yield* limiter.check(magicLinkKeys("x@d.com", "192.0.2.1"))
      yield* Scope.close(scope, Exit.void)
      const exit = yield* Effect.exit(limiter.check(magicLinkKeys("x@d.com", "192.0.2.1")))
      assert.isTrue(Exit.hasInterrupts(exit))
    }))

  it.live("closing the scope with requests queued answers every one of them", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const limiter = yield* makeRateLimiter().pipe(Scope.provide(scope))
      // More callers than the mailbox holds, so some wait to enqueue and some wait in the queue.
      const callers = yield* Effect.forEach(
        Array.from({ length: 1_000 }, (_, i) => magicLinkKeys(`u${i}@d.com`, `192.0.2.${i % 250}`)),
        (keys) => Effect.forkChild(Effect.exit(limiter.check(keys)))
      )
      yield* Effect.yieldNow
      yield* Scope.close(scope, Exit.void)
      const exits = yield* Effect.forEach(callers, Fiber.join).pipe(Effect.timeout("5 seconds"))
      const interrupted = exits.filter(Exit.hasInterrupts).length
      assert.strictEqual(exits.filter(Exit.isSuccess).length + interrupted, 1_000)
      assert.isAbove(interrupted, 0)
    }))
})

describe("RateLimiter memory bound", () => {
  const oneShot: RateLimitRule = { limit: 1, window: Duration.minutes(15) }
  const key = (i: number): ReadonlyArray<RateLimitKey> => [{ key: `k${i}`, rule: oneShot }]

  it.effect("with maxKeys = 100, 10 000 keys leave exactly the 100 most recently used", () =>
    Effect.gen(function*() {
      const limiter = yield* makeRateLimiter({ maxKeys: 100 })
      for (let i = 0; i < 10_000; i++) assert.strictEqual(yield* outcome(limiter, key(i)), "ok")
      // Still remembered (and still within their window): refused. Refusals create no keys.
      for (let i = 9_900; i < 10_000; i++) assert.strictEqual(yield* outcome(limiter, key(i)), 900)
      // The 101st most recent was evicted, so its count is forgotten; so was the very first.
      assert.strictEqual(yield* outcome(limiter, key(9_899)), "ok")
      assert.strictEqual(yield* outcome(limiter, key(0)), "ok")
      // Those two admissions pushed out the two least recently used: k9900 and k9901.
      assert.strictEqual(yield* outcome(limiter, key(9_900)), "ok")
      assert.strictEqual(yield* outcome(limiter, key(9_999)), 900)
    }))

  it.effect("a refused key counts as used, so hammering it keeps it from eviction", () =>
    Effect.gen(function*() {
      const limiter = yield* makeRateLimiter({ maxKeys: 2 })
      yield* outcome(limiter, key(1))
      yield* outcome(limiter, key(2))
      assert.strictEqual(yield* outcome(limiter, key(1)), 900) // k1 is now the most recent
      assert.strictEqual(yield* outcome(limiter, key(3)), "ok") // evicts k2
      assert.strictEqual(yield* outcome(limiter, key(1)), 900)
      assert.strictEqual(yield* outcome(limiter, key(2)), "ok")
    }))

  it.effect("expired buckets are swept before a live key is evicted", () =>
    Effect.gen(function*() {
      const limiter = yield* makeRateLimiter({ maxKeys: 2 })
      const short: RateLimitRule = { limit: 1, window: Duration.minutes(1) }
      yield* outcome(limiter, key(1)) // 15-minute window: live for a while
      yield* outcome(limiter, [{ key: "short", rule: short }]) // expires after a minute
      yield* TestClock.adjust("2 minutes")
      // Plain LRU would evict k1 (the oldest); the sweep drops the expired bucket instead.
      assert.strictEqual(yield* outcome(limiter, [{ key: "new", rule: short }]), "ok")
      assert.strictEqual(yield* outcome(limiter, key(1)), 780)
    }))
})

// ---------------------------------------------------------------------------------------------
// Property tests

/** Spellings of a few people's mailboxes at 2 domains (dots, `+tag`, case), so buckets collide. */
const emailOf = (people: ReadonlyArray<string>) =>
  fc.record({
    local: fc.constantFrom(...people),
    domain: fc.constantFrom("x.io", "y.org"),
    dotAt: fc.option(fc.integer({ min: 1, max: 2 })),
    tag: fc.option(fc.constantFrom("", "1", "news")),
    upper: fc.boolean()
  }).map(({ local, domain, dotAt, tag, upper }) => {
    const dotted = dotAt === null ? local : `${local.slice(0, dotAt)}.${local.slice(dotAt)}`
    const spelled = `${dotted}${tag === null ? "" : `+${tag}`}@${domain}`
    return upper ? spelled.toUpperCase() : spelled
  })
const requestOf = (people: ReadonlyArray<string>, addresses: ReadonlyArray<string>) =>
  fc.record({ email: emailOf(people), address: fc.constantFrom(...addresses) })

/**
 * Batches: 16 mailboxes over 3 addresses, so a batch of 20 fills an address as readily as a
 * mailbox. Steps of whole minutes and of the full 5 minutes are common, so requests land exactly
 * on window edges.
 */
const batchRequest = requestOf(
  ["ann", "bob", "cid", "eve", "fay", "gus", "hal", "ivy"],
  ["192.0.2.1", "192.0.2.2", "2001:db8::1"]
)
const batchAdvance = fc.oneof(fc.constantFrom(0, 60_000, 300_000), fc.integer({ min: 0, max: 300_000 }))

/**
 * One request per step: 6 mailboxes over 2 addresses and mostly short steps, so a window holds
 * enough requests to fill both kinds of key, sometimes both at once. Most steps keep to a 5-second
 * grid, so a request often lands exactly 15 minutes after an earlier one.
 */
const singleRequest = requestOf(["ann", "bob", "cid"], ["192.0.2.1", "2001:db8::1"])
const singleAdvance = fc.oneof(
  { arbitrary: fc.constantFrom(0, 5_000, 10_000, 20_000), weight: 8 },
  { arbitrary: fc.integer({ min: 0, max: 10_000 }), weight: 1 },
  { arbitrary: fc.constantFrom(60_000, 300_000, 900_000), weight: 1 }
)

interface Call {
  readonly at: number
  readonly keys: ReadonlyArray<RateLimitKey>
  readonly result: "ok" | number
}

/** Each run gets a fresh TestClock (starting at 0) and a fresh limiter, closed with its scope. */
const runWithTestClock = <A>(program: Effect.Effect<A, never, Scope.Scope>): Promise<A> =>
  Effect.runPromise(program.pipe(Effect.scoped, Effect.provide(TestClock.layer())))

const admittedIn = (calls: ReadonlyArray<Call>, key: string, from: number, to: number): number =>
  calls.filter((c) => c.result === "ok" && c.at > from && c.at <= to && c.keys.some((k) => k.key === key)).length

describe("RateLimiter properties", () => {
  it("concurrent batches on a moving clock: never over a limit, never a false refusal", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            advance: batchAdvance,
            batch: fc.array(batchRequest, { minLength: 1, maxLength: 20, size: "max" })
          }),
          { minLength: 1, maxLength: 12, size: "max" }
        ),
        (steps) =>
          runWithTestClock(Effect.gen(function*() {
            const limiter = yield* makeRateLimiter()
            const calls: Array<Call> = []
            for (const step of steps) {
              yield* TestClock.adjust(Duration.millis(step.advance))
              const at = yield* Clock.currentTimeMillis
              const results = yield* Effect.forEach(
                step.batch,
                ({ email, address }) => {
                  const keys = magicLinkKeys(email, address)
                  return Effect.map(outcome(limiter, keys), (result): Call => ({ at, keys, result }))
                },
                { concurrency: "unbounded" }
              )
              calls.push(...results)
            }

            // 1. No half-open window (t - 15 min, t] holds more admissions than the key's limit.
            const admitted = new Map<string, { rule: RateLimitRule; times: Array<number> }>()
            for (const call of calls) {
              if (call.result !== "ok") continue
              for (const { key, rule } of call.keys) {
                const entry = admitted.get(key) ?? { rule, times: [] }
                entry.times.push(call.at)
                admitted.set(key, entry)
              }
            }
            for (const [key, { rule, times }] of admitted) {
              for (let i = 0; i + rule.limit < times.length; i++) {
                const first = times[i]!
                const over = times[i + rule.limit]!
                assert.isAtLeast(over - first, Duration.toMillis(rule.window), `${key}: ${times.join(",")}`)
              }
            }

            for (const call of calls) {
              if (call.result === "ok") continue
              // 2. Every refusal names a positive whole number of seconds, within one window.
              assert.isTrue(Number.isInteger(call.result) && call.result >= 1 && call.result <= 900)
              // 3. No false refusal: some key had a full window. Counting every admission at the same
              // instant (the whole batch, whatever the order) only over-counts, so this is sound.
              const someFull = call.keys.some(({ key, rule }) =>
                admittedIn(calls, key, call.at - Duration.toMillis(rule.window), call.at) >= rule.limit
              )
              assert.isTrue(someFull, `false refusal at ${call.at}: ${call.keys.map((k) => k.key).join(" ")}`)
            }
          }))
      ),
      { numRuns: 100 }
    )
  })

  it("one request at a time: exactly the reference model, Retry-After included", async () => {
    // The model keeps every admission forever and filters: too slow for production, easy to trust.
    const model = (calls: ReadonlyArray<Call>, at: number, keys: ReadonlyArray<RateLimitKey>): "ok" | number => {
      let waitMs = 0
      for (const { key, rule } of keys) {
        const windowMs = Duration.toMillis(rule.window)
        const inWindow = calls
          .filter((c) => c.result === "ok" && c.at > at - windowMs && c.keys.some((k) => k.key === key))
          .map((c) => c.at)
        if (inWindow.length >= rule.limit) {
          waitMs = Math.max(waitMs, inWindow[inWindow.length - rule.limit]! + windowMs - at)
        }
      }
      return waitMs === 0 ? "ok" : Math.max(1, Math.ceil(waitMs / 1000))
    }
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({ advance: singleAdvance, request: singleRequest }),
          { minLength: 1, maxLength: 80, size: "max" }
        ),
        (steps) =>
          runWithTestClock(Effect.gen(function*() {
            const limiter = yield* makeRateLimiter()
            const calls: Array<Call> = []
            for (const { advance, request } of steps) {
              yield* TestClock.adjust(Duration.millis(advance))
              const now = yield* Clock.currentTimeMillis
              const keys = magicLinkKeys(request.email, request.address)
              const expected = model(calls, now, keys)
              const result = yield* outcome(limiter, keys)
              assert.strictEqual(result, expected, `at ${now}: ${keys.map((k) => k.key).join(" ")}`)
              calls.push({ at: now, keys, result })
            }
          }))
      ),
      { numRuns: 100 }
    )
  })
})
