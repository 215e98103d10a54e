/**
 * The per-user bound on concurrent statements (issue #19, finding 2): examples, and a property
 * test on real time with many concurrent admissions of random users, durations, failures and
 * interruptions: never more than the bound at once per user, no permit leaked, and no refusal of
 * a user under the bound.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber } from "effect"
import fc from "fast-check"
import { makeStatementAdmission, type StatementAdmissionShape, StatementsBusy } from "../../src/services/StatementAdmission.ts"

describe("StatementAdmission", () => {
  it.live("admits up to the bound at once; the next waits for one to end, other users do not wait", () =>
    Effect.gen(function*() {
      const admission = makeStatementAdmission({ maxPerKey: 2, maxWait: Duration.seconds(5) })
      const gate = yield* Deferred.make<void>()
      const held = yield* Effect.forEach([1, 2], () => Effect.forkChild(admission.admit("a", Deferred.await(gate))))
      yield* Effect.yieldNow
      assert.deepStrictEqual(admission.usage("a"), { running: 2, waiting: 0 })
      const third = yield* Effect.forkChild(admission.admit("a", Effect.succeed("third")))
      yield* Effect.yieldNow
      assert.deepStrictEqual(admission.usage("a"), { running: 2, waiting: 1 })
      assert.strictEqual(yield* admission.admit("b", Effect.succeed("other user")), "other user")
      yield* Deferred.succeed(gate, undefined)
      assert.strictEqual(yield* Fiber.join(third), "third")
      yield* Fiber.joinAll(held)
      assert.deepStrictEqual(admission.usage("a"), { running: 0, waiting: 0 })
    }))

  it.live("past the bound and the wait: StatementsBusy with Retry-After; the permits are still there afterwards", () =>
    Effect.gen(function*() {
      const admission = makeStatementAdmission({ maxPerKey: 1, maxWait: Duration.millis(20) })
      const gate = yield* Deferred.make<void>()
      const holder = yield* Effect.forkChild(admission.admit("a", Deferred.await(gate)))
      yield* Effect.yieldNow
      const refused = yield* Effect.flip(admission.admit("a", Effect.void))
      assert.instanceOf(refused, StatementsBusy)
      assert.strictEqual(refused.limit, 1)
      assert.isAtLeast(refused.retryAfterSeconds, 1)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(holder)
      assert.strictEqual(yield* admission.admit("a", Effect.succeed(1)), 1)
      assert.deepStrictEqual(admission.usage("a"), { running: 0, waiting: 0 })
    }))

  it.live("a full queue refuses at once", () =>
    Effect.gen(function*() {
      const admission = makeStatementAdmission({ maxPerKey: 1, maxWait: Duration.seconds(30), maxWaiting: 1 })
      const gate = yield* Deferred.make<void>()
      const holder = yield* Effect.forkChild(admission.admit("a", Deferred.await(gate)))
      const waiter = yield* Effect.forkChild(admission.admit("a", Effect.void))
      yield* Effect.yieldNow
      assert.deepStrictEqual(admission.usage("a"), { running: 1, waiting: 1 })
      assert.instanceOf(yield* Effect.flip(admission.admit("a", Effect.void)), StatementsBusy)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.joinAll([holder, waiter])
      assert.deepStrictEqual(admission.usage("a"), { running: 0, waiting: 0 })
    }))

  it.live("a failure, a defect and an interruption each release their permit", () =>
    Effect.gen(function*() {
      const admission = makeStatementAdmission({ maxPerKey: 1, maxWait: Duration.millis(10) })
      assert.isTrue(Exit.isFailure(yield* Effect.exit(admission.admit("a", Effect.fail("boom")))))
      assert.isTrue(Exit.isFailure(yield* Effect.exit(admission.admit("a", Effect.die("defect")))))
      const running = yield* Effect.forkChild(admission.admit("a", Effect.never))
      yield* Effect.yieldNow
      const waiting = yield* Effect.forkChild(admission.admit("a", Effect.never))
      yield* Effect.yieldNow
      assert.deepStrictEqual(admission.usage("a"), { running: 1, waiting: 1 })
      yield* Fiber.interrupt(waiting)
      yield* Fiber.interrupt(running)
      assert.deepStrictEqual(admission.usage("a"), { running: 0, waiting: 0 })
      assert.strictEqual(yield* admission.admit("a", Effect.succeed("free")), "free")
    }))
})

interface Call {
  readonly user: number
  readonly startAfter: number
  readonly duration: number
  readonly fails: boolean
  readonly interruptAfter: number | null
}

const call: fc.Arbitrary<Call> = fc.record({
  user: fc.nat(3),
  startAfter: fc.nat(8),
  duration: fc.nat(12),
  fails: fc.boolean(),
  interruptAfter: fc.option(fc.nat(25))
})

/**
 * Runs `calls` at once on `admission` and checks, as they run: never more than `maxPerKey` bodies
 * of a user running; each refusal came while `maxPerKey` of that user's calls were admitted and
 * not yet over. Afterwards no permit or waiter is left, and every user gets `maxPerKey` at once.
 */
const exercise = (admission: StatementAdmissionShape, maxPerKey: number, calls: ReadonlyArray<Call>) =>
  Effect.gen(function*() {
    /** Bodies running now (a lower bound of the permits held). */
    const running = [0, 0, 0, 0]
    /** Admitted calls whose admit has not returned yet (an upper bound of the permits held). */
    const admitted = [0, 0, 0, 0]
    const problems: Array<string> = []
    const run = ({ user, duration, fails }: Call) => {
      let wasAdmitted = false
      const body = Effect.suspend(() => {
        wasAdmitted = true
        admitted[user]!++
        running[user]!++
        if (running[user]! > maxPerKey) problems.push(`user ${user}: ${running[user]} running`)
        return Effect.sleep(Duration.millis(duration)).pipe(Effect.andThen(fails ? Effect.fail("failed") : Effect.void))
      }).pipe(Effect.ensuring(Effect.sync(() => running[user]!--)))
      return admission.admit(String(user), body).pipe(
        Effect.catchTag("StatementsBusy", () =>
          Effect.sync(() => {
            if (admitted[user]! < maxPerKey) problems.push(`user ${user} refused with ${admitted[user]} admitted`)
          })),
        Effect.onExit(() => Effect.sync(() => (wasAdmitted ? admitted[user]!-- : undefined))),
        Effect.ignore
      )
    }
    const fibers = yield* Effect.forEach(calls, (c) =>
      Effect.forkChild(Effect.andThen(Effect.sleep(Duration.millis(c.startAfter)), run(c))))
    yield* Effect.forEach(calls, (c, index) =>
      c.interruptAfter === null ? Fiber.await(fibers[index]!) : Effect.andThen(Effect.sleep(Duration.millis(c.interruptAfter)), Fiber.interrupt(fibers[index]!)),
    { concurrency: "unbounded", discard: true })
    yield* Fiber.awaitAll(fibers)

    for (const user of [0, 1, 2, 3]) {
      const usage = admission.usage(String(user))
      if (usage.running !== 0 || usage.waiting !== 0) problems.push(`user ${user} left ${JSON.stringify(usage)}`)
    }
    // Behaviour, not only the books: each user can hold the whole bound again, at once.
    const gate = yield* Deferred.make<void>()
    const holders = yield* Effect.forEach([0, 1, 2, 3].flatMap((user) => Array.from({ length: maxPerKey }, () => user)), (user) =>
      Effect.forkChild(admission.admit(String(user), Effect.andThen(Effect.sync(() => running[user]!++), Deferred.await(gate)))))
    yield* Effect.yieldNow
    for (const user of [0, 1, 2, 3]) {
      if (running[user] !== maxPerKey) problems.push(`user ${user}: ${running[user]} of ${maxPerKey} admitted afterwards`)
    }
    yield* Deferred.succeed(gate, undefined)
    yield* Fiber.awaitAll(holders)
    return problems
  })

describe("StatementAdmission properties", () => {
  it("random users, durations, failures and interruptions: within the bound, nothing leaked, no refusal under the bound", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 4 }),
        fc.nat(15),
        fc.integer({ min: 1, max: 8 }),
        fc.array(call, { minLength: 1, maxLength: 40 }),
        async (maxPerKey, maxWaitMs, maxWaiting, calls) => {
          const admission = makeStatementAdmission({ maxPerKey, maxWait: Duration.millis(maxWaitMs), maxWaiting })
          const problems = await Effect.runPromise(exercise(admission, maxPerKey, calls))
          assert.deepStrictEqual(problems, [])
        }
      ),
      { numRuns: 100 }
    )
  })
})
