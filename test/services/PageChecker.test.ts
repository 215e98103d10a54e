/**
 * The page checker's pool of long-lived workers: a worker parses source after source; one past
 * its deadline is ended and replaced, so a slow source costs only its own deadline and the next
 * source is answered; a source finding every worker parsing waits briefly, then PagesBusy; closing
 * the scope ends every thread. A property test on real time: concurrent checks of normal and slow
 * sources, some interrupted, each answered once as its source deserves, never more workers parsing
 * than the pool's size, no thread left once the scope closes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Duration, Effect, Exit, Fiber, Option, Scope } from "effect"
import fc from "fast-check"
import { makePageChecker, type PageCheckerOptions, type PageCheckerShape, PagesBusy, PageTooComplex } from "../../src/services/PageChecker.ts"

/** Minutes of parsing without a deadline. */
const SLOW = "- ".repeat(100_000) + "x"
const normal = (n: number) => `# Page ${n}\n\n\`\`\`sql totals\nSELECT ${n} AS n\n\`\`\`\n\n\`\`\`value query=totals column=n\n\`\`\`\n`

/** A checker in a scope of its own, closed by the caller. */
const open = (options: PageCheckerOptions) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const pages = yield* Scope.provide(scope)(makePageChecker(options))
    return { pages, close: Scope.close(scope, Exit.void) }
  })

const options = (size: number, wait: number, deadline = 1_000): PageCheckerOptions => ({
  size,
  wait: Duration.millis(wait),
  parseDeadline: Duration.millis(deadline)
})

describe("PageChecker", () => {
  it.live("reuses its workers: 20 sources one after another are parsed by one worker", () =>
    Effect.gen(function*() {
      const { pages, close } = yield* open(options(4, 250))
      for (let n = 0; n < 20; n++) {
        const parsed = yield* pages.parse(normal(n))
        assert.deepStrictEqual(parsed.problems, [])
        assert.strictEqual(parsed.queries[0]?.query.sql, `SELECT ${n} AS n`)
      }
      assert.strictEqual(pages.usage().started, 1)
      yield* close
      assert.deepStrictEqual(pages.usage(), { started: 1, exited: 1, workers: 0, busy: 0, waiting: 0 })
    }))

  it.live("a slow source followed at once by a normal one, on one worker: the slow one is PageTooComplex, the normal one answered by its replacement", () =>
    Effect.gen(function*() {
      const { pages, close } = yield* open(options(1, 10_000, 500))
      const slow = yield* Effect.forkChild(Effect.flip(pages.parse(SLOW)))
      yield* Effect.yieldNow
      // It waits past the slow one's deadline: its own deadline counts from when its worker has it.
      const next = yield* Effect.forkChild(pages.parse(normal(1)))
      assert.instanceOf(yield* Fiber.join(slow), PageTooComplex)
      assert.deepStrictEqual((yield* Fiber.join(next)).problems, [])
      assert.strictEqual(pages.usage().started, 2)
      yield* close
      assert.strictEqual(pages.usage().exited, 2)
    }))

  it.live("every worker parsing: a source waits the wait, then PagesBusy; the slow one's replacement takes the next source as it loads", () =>
    Effect.gen(function*() {
      const { pages, close } = yield* open(options(1, 5, 500))
      const slow = yield* Effect.forkChild(Effect.flip(pages.parse(SLOW)))
      yield* Effect.yieldNow
      const refused = yield* Effect.flip(pages.parse(normal(1)))
      assert.instanceOf(refused, PagesBusy)
      assert.strictEqual(refused.message, "too many page sources are being checked at once; try again shortly")
      assert.instanceOf(yield* Fiber.join(slow), PageTooComplex)
      // The replacement is loading (far longer than the wait): the source is its first, not a 429.
      assert.strictEqual(pages.usage().workers, 1)
      assert.deepStrictEqual((yield* pages.parse(normal(2))).problems, [])
      assert.strictEqual(pages.usage().started, 2)
      yield* close
    }))

  it.live("closing the scope answers the sources parsing and waiting, and ends every thread", () =>
    Effect.gen(function*() {
      const { pages, close } = yield* open(options(1, 10_000, 30_000))
      const parsing = yield* Effect.forkChild(Effect.flip(pages.parse(SLOW)))
      yield* Effect.yieldNow
      const waiting = yield* Effect.forkChild(Effect.flip(pages.parse(normal(1))))
      yield* Effect.yieldNow
      assert.strictEqual(pages.usage().waiting, 1)
      yield* close
      for (const fiber of [parsing, waiting]) {
        const failure = yield* Fiber.join(fiber)
        assert.instanceOf(failure, PagesBusy)
        assert.strictEqual(failure.message, "the page checker is shutting down; try again shortly")
      }
      assert.deepStrictEqual(pages.usage(), { started: 1, exited: 1, workers: 0, busy: 0, waiting: 0 })
      assert.instanceOf(yield* Effect.flip(pages.parse(normal(2))), PagesBusy)
      assert.strictEqual(pages.usage().started, 1)
    }))
})

interface Check {
  readonly slow: boolean
  readonly startAfter: number
  readonly interruptAfter: number | null
}

const check: fc.Arbitrary<Check> = fc.record({
  slow: fc.nat(3).map((n) => n === 0),
  startAfter: fc.nat(40),
  interruptAfter: fc.option(fc.nat(300), { freq: 4 })
})

/**
 * Runs `checks` at once on a fresh checker and says what went wrong: an answer that does not fit
 * its source, a caller answered other than once, more workers parsing than `size`, a waiter or a
 * thread left behind.
 */
const exercise = (size: number, waitMs: number, checks: ReadonlyArray<Check>) =>
  Effect.gen(function*() {
    const problems: Array<string> = []
    const { pages, close } = yield* open(options(size, waitMs, 600))
    const answers = checks.map(() => 0)
    let done = false
    const watch = (usage: ReturnType<PageCheckerShape["usage"]>) => {
      if (usage.busy > size || usage.workers > size) problems.push(`busy ${usage.busy}, workers ${usage.workers} of ${size}`)
    }
    const sampler = yield* Effect.forkChild(Effect.gen(function*() {
      while (!done) {
        watch(pages.usage())
        yield* Effect.sleep(2)
      }
    }))
    const run = (c: Check, index: number) => {
      const parse = pages.parse(c.slow ? SLOW : normal(index)).pipe(
        Effect.onExit((exit) =>
          Effect.sync(() => {
            answers[index]!++
            watch(pages.usage())
            if (Exit.isSuccess(exit)) {
              if (c.slow) problems.push(`slow source ${index} parsed`)
              return
            }
            if (Cause.hasDies(exit.cause)) return problems.push(`source ${index} died: ${String(Cause.squash(exit.cause))}`)
            const error = Option.getOrUndefined(Cause.findErrorOption(exit.cause))
            if (error === undefined) return // interrupted
            if (error instanceof PageTooComplex && !c.slow) problems.push(`normal source ${index} too complex`)
            if (!(error instanceof PageTooComplex) && !(error instanceof PagesBusy)) problems.push(`source ${index}: ${String(error)}`)
          })
        )
      )
      const bounded = c.interruptAfter === null ? Effect.asVoid(parse) : Effect.asVoid(Effect.timeoutOption(parse, Duration.millis(c.interruptAfter)))
      return Effect.andThen(Effect.sleep(Duration.millis(c.startAfter)), Effect.ignore(bounded))
    }
    // Every caller is answered well within this (a slow source ends at its deadline).
    const finished = yield* Effect.timeoutOption(Effect.forEach(checks, run, { concurrency: "unbounded", discard: true }), Duration.seconds(60))
    if (Option.isNone(finished)) problems.push("a caller was never answered")
    done = true
    yield* Fiber.join(sampler)
    answers.forEach((count, index) => {
      if (count !== 1) problems.push(`source ${index} answered ${count} times`)
    })
    if (pages.usage().waiting !== 0) problems.push(`${pages.usage().waiting} left waiting`)
    yield* close
    const after = pages.usage()
    if (after.exited !== after.started || after.workers !== 0) problems.push(`after close: ${JSON.stringify(after)}`)
    return problems
  })

describe("PageChecker properties", () => {
  it("concurrent normal and slow sources, some interrupted: each answered once as its source deserves, within the pool, no thread left", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 3 }),
        fc.constantFrom(30, 1_500),
        fc.array(check, { minLength: 1, maxLength: 10 }),
        async (size, waitMs, checks) => {
          assert.deepStrictEqual(await Effect.runPromise(exercise(size, waitMs, checks)), [])
        }
      ),
      { numRuns: 8 }
    )
  }, 300_000)
})
