/**
 * ConversationActor: jobs of one conversation run one at a time, in arrival order; jobs of
 * different conversations run side by side; a failing job does not stop the mailbox.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import fc from "fast-check"
import { ConversationActors } from "../../src/actors/ConversationActor.ts"

const run = <A, E>(effect: Effect.Effect<A, E, ConversationActors>) =>
  Effect.runPromise(effect.pipe(Effect.provide(ConversationActors.layer)))

describe("ConversationActors", () => {
  it("property: concurrent jobs of one conversation never overlap, and every job gets its own answer", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ conversation: fc.constantFrom("a", "b", "c"), sleep: fc.integer({ min: 0, max: 3 }), fails: fc.boolean() }), {
          minLength: 1,
          maxLength: 40
        }),
        async (jobs) => {
          const running = new Map<string, number>()
          let overlaps = 0
          const results = await run(Effect.gen(function*() {
            const actors = yield* ConversationActors
            return yield* Effect.forEach(jobs, (job, index) =>
              actors.exclusive(job.conversation, Effect.gen(function*() {
                const inside = (running.get(job.conversation) ?? 0) + 1
                running.set(job.conversation, inside)
                if (inside > 1) overlaps++
                yield* Effect.sleep(`${job.sleep} millis`)
                running.set(job.conversation, (running.get(job.conversation) ?? 1) - 1)
                if (job.fails) return yield* Effect.fail(`job ${index} failed`)
                return index
              })).pipe(Effect.exit), { concurrency: "unbounded" })
          }))
          expect(overlaps).toBe(0)
          results.forEach((exit, index) => {
            if (jobs[index]!.fails) expect(Exit.isFailure(exit)).toBe(true)
            else expect(exit).toEqual(Exit.succeed(index))
          })
        }
      ),
      { numRuns: 60 }
    )
  })

  it("runs one conversation's jobs in arrival order", async () => {
    const order: Array<number> = []
    await run(Effect.gen(function*() {
      const actors = yield* ConversationActors
      yield* Effect.forEach([0, 1, 2, 3, 4, 5, 6, 7], (n) =>
        actors.exclusive("x", Effect.andThen(Effect.sleep(`${(8 - n) % 3} millis`), Effect.sync(() => order.push(n)))), {
        concurrency: "unbounded"
      })
    }))
    expect(order).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
  })

  it("lets different conversations proceed side by side", async () => {
    const started = Date.now()
    await run(Effect.gen(function*() {
      const actors = yield* ConversationActors
      yield* Effect.forEach(["a", "b", "c", "d"], (id) => actors.exclusive(id, Effect.sleep("100 millis")), { concurrency: "unbounded" })
    }))
    // Four 100 ms jobs in parallel, not 400 ms in a row (a bound with plenty of room, not a timing target).
    expect(Date.now() - started).toBeLessThan(350)
  })

  it("keeps serving after a failed and after a defective job", async () => {
    const result = await run(Effect.gen(function*() {
      const actors = yield* ConversationActors
      const failed = yield* Effect.exit(actors.exclusive("z", Effect.fail("no")))
      const died = yield* Effect.exit(actors.exclusive("z", Effect.die("boom")))
      const next = yield* actors.exclusive("z", Effect.succeed("still here"))
      return { failed: Exit.isFailure(failed), died: Exit.isFailure(died), next }
    }))
    expect(result).toEqual({ failed: true, died: true, next: "still here" })
  })
})

