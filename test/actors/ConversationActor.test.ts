/**
 * ConversationActor with a conversation's work faked in memory (the same rules as sys.begin_turn
 * and claimApproval): chat, continue and execute-tool of one conversation are admitted one at a
 * time and their work never overlaps; every caller gets an answer; nothing stays pending, whatever
 * fails; a reply runs on the actor, not on its caller, and its events can be read from the first at
 * any time; conversations proceed side by side; closing the actors closes what was left pending.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Logger, Option, type Scope, Stream } from "effect"
import fc from "fast-check"
import { makeConversationActors } from "../../src/actors/ConversationActor.ts"
import type { ChatEvent } from "../../src/services/ChatTurn.ts"
import { ConversationNotFound, MessageNotFound, TurnRefused } from "../../src/services/Conversations.ts"
import type {
  ConversationWork,
  Emit,
  ReplyRefused,
  ReplyRequest,
  ToolDecided,
  ToolDecision,
  ToolRefused
} from "../../src/services/ConversationWork.ts"

type Status = "pending" | "pending_approval" | "complete" | "rejected" | "error"
interface FakeMessage {
  readonly id: string
  readonly role: "user" | "assistant"
  kind: "text" | "tool_call"
  status: Status
}

/** How a fake reply ends: text, a tool call, a model failure, a defect; after `sleep` ms, or when `gate` opens. */
interface Plan {
  readonly ending: "text" | "tool" | "fails" | "dies"
  readonly sleep: number
  readonly gate?: Deferred.Deferred<void>
}

const C1 = "00000000-0000-4000-8000-000000000001"
const C2 = "00000000-0000-4000-8000-000000000002"
const caller = { role: "owner", userId: "00000000-0000-4000-8000-0000000000aa" } as const

/** A conversation's work in memory; it counts work that overlaps. */
const fakeWork = () => {
  const conversations = new Map<string, Array<FakeMessage>>()
  const plans = new Map<string, Plan>()
  const admissions: Array<string> = []
  const stoppedReplies: Array<string> = []
  let running = 0
  let overlaps = 0
  let ids = 0
  const add = (conversationId: string, role: FakeMessage["role"], kind: FakeMessage["kind"], status: Status) => {
    const message: FakeMessage = { id: `m${ids++}`, role, kind, status }
    conversations.get(conversationId)!.push(message)
    return message
  }
  const inside = <A, E>(effect: Effect.Effect<A, E>) =>
    Effect.sync(() => {
      running++
      if (running > 1) overlaps++
    }).pipe(Effect.andThen(effect), Effect.ensuring(Effect.sync(() => running--)))
  const wait = (plan: Plan) => (plan.gate === undefined ? Effect.sleep(`${plan.sleep} millis`) : Deferred.await(plan.gate))

  const run = (placeholder: FakeMessage, plan: Plan, emit: Emit, stop?: Deferred.Deferred<void>) =>
    inside(Effect.gen(function*() {
      // Names its reply: an attacher's events are compared with its caller's.
      yield* emit({ event: "token", data: { text: placeholder.id } })
      const stopped = yield* (stop === undefined ? Effect.as(wait(plan), false) : Effect.raceFirst(Effect.as(wait(plan), false), Effect.as(Deferred.await(stop), true)))
      if (stopped) {
        // As ChatTurn does: the text so far is the reply, and its events end with a stopped `done`.
        placeholder.status = "complete"
        stoppedReplies.push(placeholder.id)
        return yield* emit({ event: "done", data: { message: { id: placeholder.id, role: "assistant", content: { type: "text", text: "" }, status: "complete" }, stopped: true } })
      }
      if (plan.ending === "fails") return yield* Effect.fail("the model failed")
      if (plan.ending === "dies") return yield* Effect.die("a defect")
      placeholder.kind = plan.ending === "tool" ? "tool_call" : "text"
      placeholder.status = "complete"
      yield* emit({ event: "done", data: { message: { id: placeholder.id, role: "assistant", content: { type: "text", text: "" }, status: "complete" } } })
    }))

  const work: ConversationWork<never> = {
    begin: (request: ReplyRequest) =>
      Effect.suspend((): Effect.Effect<(emit: Emit, stop: Deferred.Deferred<void>) => Effect.Effect<void, unknown>, ReplyRefused> => {
        const messages = conversations.get(request.conversationId)
        if (messages === undefined) return Effect.fail(new ConversationNotFound())
        admissions.push(request.start.kind === "chat" ? request.start.content : "continue")
        const latest = messages.at(-1)
        if (latest?.status === "pending") return Effect.fail(new TurnRefused({ message: "a reply is in progress" }))
        const resumable = latest !== undefined && latest.kind === "tool_call" && (latest.status === "complete" || latest.status === "error")
        if (request.start.kind === "continue" && !resumable) return Effect.fail(new TurnRefused({ message: "nothing to continue" }))
        if (request.start.kind === "chat") add(request.conversationId, "user", "text", "complete")
        const placeholder = add(request.conversationId, "assistant", "text", "pending")
        const plan = plans.get(request.start.kind === "chat" ? request.start.content : "continue") ?? { ending: "text", sleep: 0 }
        return Effect.succeed((emit: Emit, stop: Deferred.Deferred<void>) => run(placeholder, plan, emit, stop))
      }),
    decide: (decision: ToolDecision) =>
      Effect.suspend((): Effect.Effect<ToolDecided<never>, ToolRefused> => {
        const messages = conversations.get(decision.conversationId)
        if (messages === undefined) return Effect.fail(new ConversationNotFound())
        admissions.push(`execute ${decision.messageId}`)
        const message = messages.find((candidate) => candidate.id === decision.messageId)
        if (message === undefined) return Effect.fail(new MessageNotFound())
        if (message.status === "complete" || message.status === "rejected" || message.status === "error") {
          return Effect.succeed({ _tag: "Answered", answer: { status: message.status, already_processed: true } } as const)
        }
        if (message.status !== "pending_approval") return Effect.fail(new TurnRefused({ message: "not waiting for approval" }))
        message.status = decision.approved ? "pending" : "rejected"
        if (!decision.approved) return Effect.succeed({ _tag: "Answered", answer: { status: "rejected", result: null, error: null } } as const)
        const plan = plans.get(`execute ${decision.messageId}`) ?? { ending: "tool", sleep: 0 }
        return Effect.succeed({
          _tag: "Run",
          run: inside(Effect.andThen(wait(plan), Effect.sync(() => {
            message.status = "complete"
            return { status: "complete", result: "ran", error: null } as const
          })))
        } as const)
      }),
    failPending: (owned) =>
      Effect.sync(() => {
        for (const message of conversations.get(owned.conversationId) ?? []) if (message.status === "pending") message.status = "error"
      })
  }
  return {
    work,
    conversations,
    plans,
    admissions,
    stoppedReplies,
    add,
    open: (conversationId: string) => conversations.set(conversationId, []),
    overlaps: () => overlaps,
    running: () => running,
    pending: () => [...conversations.values()].flat().filter((message) => message.status === "pending").length
  }
}

const chatIn = (conversationId: string, content: string): ReplyRequest => ({ context: caller, conversationId, start: { kind: "chat", content } })
const continueIn = (conversationId: string): ReplyRequest => ({ context: caller, conversationId, start: { kind: "continue" } })
const approve = (conversationId: string, messageId: string, approved = true): ToolDecision => ({
  context: caller,
  conversationId,
  messageId,
  approved,
  args: Option.none()
})
/** Runs a test's program in a scope of its own (the actors close with it), without log output. */
const run = <A, E>(program: Effect.Effect<A, E, Scope.Scope>) => Effect.runPromise(program.pipe(Effect.scoped, Effect.provide(Logger.layer([]))))
/** Waits until `condition` holds (what the actors' fibers do happens between the test's steps). */
const until = (condition: () => boolean) => Effect.repeat(Effect.sleep("1 millis"), { until: condition })
const collect = (events: Stream.Stream<ChatEvent>) => Effect.map(Stream.runCollect(events), (all) => Array.from(all, (event) => event.event))

const expectedRefusal = (exit: Exit.Exit<unknown, unknown>) =>
  Exit.isSuccess(exit) ||
  (Exit.isFailure(exit) && exit.cause.reasons.every((reason) => reason._tag === "Fail" && ["TurnRefused", "MessageNotFound"].includes((reason.error as { _tag: string })._tag)))

describe("ConversationActors", () => {
  it("property: concurrent chat/continue/execute-tool on one conversation never overlap, every caller is answered, nothing stays pending", async () => {
    const operation = fc.record({
      kind: fc.constantFrom("chat", "continue", "execute", "reject"),
      ending: fc.constantFrom("text", "tool", "fails", "dies"),
      sleep: fc.integer({ min: 0, max: 3 }),
      stagger: fc.integer({ min: 0, max: 4 }),
      // Whether the caller reads its reply's events as they come, or only after everyone was answered.
      readsAtOnce: fc.boolean()
    })
    await fc.assert(
      fc.asyncProperty(fc.array(operation, { minLength: 1, maxLength: 16 }), async (operations) => {
        const fake = fakeWork()
        fake.open(C1)
        fake.add(C1, "user", "text", "complete")
        const legacy = fake.add(C1, "assistant", "tool_call", "pending_approval")
        fake.add(C1, "assistant", "tool_call", "complete")
        fake.plans.set(`execute ${legacy.id}`, { ending: "tool", sleep: 2 })
        const outcome = await run(Effect.gen(function*() {
          const actors = yield* makeConversationActors(fake.work)
          const answers = yield* Effect.forEach(operations, (operation, index) => {
            fake.plans.set(`chat ${index}`, { ending: operation.ending, sleep: operation.sleep })
            const request = operation.kind === "chat" ? chatIn(C1, `chat ${index}`) : continueIn(C1)
            const call: Effect.Effect<unknown, unknown> = operation.kind === "chat" || operation.kind === "continue"
              ? Effect.flatMap(actors.reply(request), (events): Effect.Effect<unknown> =>
                operation.readsAtOnce ? Effect.map(collect(events), (read) => ({ read })) : Effect.succeed(events))
              : actors.executeTool(approve(C1, legacy.id, operation.kind === "execute"))
            return Effect.andThen(Effect.sleep(`${operation.stagger} millis`), Effect.exit(call))
          }, { concurrency: "unbounded" })
          // Replies not read yet are read now, from their first event.
          const events = yield* Effect.forEach(answers, (exit) =>
            Exit.isSuccess(exit) && Stream.isStream(exit.value)
              ? collect(exit.value as Stream.Stream<ChatEvent>)
              : Effect.succeed(Exit.isSuccess(exit) && typeof exit.value === "object" && exit.value !== null && "read" in exit.value
                ? (exit.value as { read: Array<string> }).read
                : undefined))
          return { answers, events }
        }))
        expect(fake.overlaps()).toBe(0)
        expect(fake.running()).toBe(0)
        expect(fake.pending()).toBe(0)
        outcome.answers.forEach((exit) => expect(expectedRefusal(exit), String(exit)).toBe(true))
        for (const events of outcome.events) {
          if (events === undefined) continue
          // Every reply's events, from the first to its end, whenever they were read.
          expect(events[0]).toBe("token")
          expect(["done", "error"]).toContain(events.at(-1))
        }
      }),
      { numRuns: 60 }
    )
  })

  it("a reply runs on the actor: the caller that stops reading stops nothing, and its events stay readable from the first", async () => {
    const fake = fakeWork()
    fake.open(C1)
    const gate = Effect.runSync(Deferred.make<void>())
    fake.plans.set("hello", { ending: "text", sleep: 0, gate })
    const result = await run(Effect.gen(function*() {
      const actors = yield* makeConversationActors(fake.work)
      const events = yield* actors.reply(chatIn(C1, "hello"))
      // The caller reads one event, then goes away (a client that disconnects).
      const first = yield* Stream.runHead(events)
      const runningAfterCallerLeft = fake.running()
      const meanwhile = yield* Effect.exit(actors.reply(chatIn(C1, "again")))
      yield* Deferred.succeed(gate, undefined)
      // Read again from the first event: the actor still has them, and the reply ended.
      return { first, runningAfterCallerLeft, meanwhile, all: yield* collect(events) }
    }))
    expect(Option.getOrUndefined(result.first)?.event).toBe("token")
    expect(result.runningAfterCallerLeft).toBe(1)
    expect(Exit.isFailure(result.meanwhile)).toBe(true)
    expect(result.all).toEqual(["token", "done"])
    expect(fake.conversations.get(C1)!.map((message) => [message.role, message.status])).toEqual([["user", "complete"], ["assistant", "complete"]])
  })

  it("a finished reply's events are read in full by a reader that comes late", async () => {
    const fake = fakeWork()
    fake.open(C1)
    const events = await run(Effect.gen(function*() {
      const actors = yield* makeConversationActors(fake.work)
      const stream = yield* actors.reply(chatIn(C1, "late"))
      // The reply ends before anyone reads it.
      yield* until(() => fake.conversations.get(C1)!.at(-1)!.status === "complete")
      return yield* collect(stream)
    }))
    expect(fake.conversations.get(C1)!.at(-1)!.status).toBe("complete")
    expect(events).toEqual(["token", "done"])
  })

  it("closing the actors (the service shutting down) interrupts running work: nothing stays pending, the events end with an error", async () => {
    const fake = fakeWork()
    fake.open(C1)
    fake.add(C1, "user", "text", "complete")
    const legacy = fake.add(C1, "assistant", "tool_call", "pending_approval")
    fake.add(C1, "assistant", "tool_call", "complete")
    const never = Effect.runSync(Deferred.make<void>())
    fake.plans.set("forever", { ending: "text", sleep: 0, gate: never })
    fake.plans.set(`execute ${legacy.id}`, { ending: "tool", sleep: 0, gate: never })
    const { stream, tool } = await run(Effect.gen(function*() {
      const actors = yield* makeConversationActors(fake.work)
      // The approved call runs; the reply is admitted (the latest message is not pending) and waits behind it.
      const tool = yield* Effect.forkDetach(Effect.exit(actors.executeTool(approve(C1, legacy.id))))
      yield* until(() => legacy.status === "pending")
      const stream = yield* actors.reply(chatIn(C1, "forever"))
      return { stream, tool }
    }))
    expect(fake.pending()).toBe(0)
    expect(fake.conversations.get(C1)!.map((message) => message.status)).toEqual(["complete", "error", "complete", "complete", "error"])
    expect(await Effect.runPromise(collect(stream))).toEqual(["error"])
    expect(Exit.isFailure(await Effect.runPromise(Fiber.join(tool)))).toBe(true)
  })

  it("lets different conversations proceed side by side", async () => {
    const fake = fakeWork()
    fake.open(C1)
    fake.open(C2)
    const gate = Effect.runSync(Deferred.make<void>())
    fake.plans.set("slow", { ending: "text", sleep: 0, gate })
    const events = await run(Effect.gen(function*() {
      const actors = yield* makeConversationActors(fake.work)
      const slow = yield* actors.reply(chatIn(C1, "slow"))
      // C2's reply ends while C1's is still running.
      const quick = yield* collect(yield* actors.reply(chatIn(C2, "quick")))
      const slowStillRunning = fake.conversations.get(C1)!.at(-1)!.status
      yield* Deferred.succeed(gate, undefined)
      return { quick, slowStillRunning, slow: yield* collect(slow) }
    }))
    expect(events).toEqual({ quick: ["token", "done"], slowStillRunning: "pending", slow: ["token", "done"] })
  })

  it("admits one conversation's calls in arrival order, and keeps serving after a failed and a defective reply", async () => {
    const fake = fakeWork()
    fake.open(C1)
    fake.plans.set("fails", { ending: "fails", sleep: 0 })
    fake.plans.set("dies", { ending: "dies", sleep: 0 })
    const gate = Effect.runSync(Deferred.make<void>())
    fake.plans.set("first", { ending: "text", sleep: 0, gate })
    const result = await run(Effect.gen(function*() {
      const actors = yield* makeConversationActors(fake.work)
      const refused = yield* Effect.forEach(["first", "second", "third", "fourth"], (content) => Effect.exit(actors.reply(chatIn(C1, content))), {
        concurrency: "unbounded"
      })
      yield* Deferred.succeed(gate, undefined)
      const first = yield* collect((refused[0] as Exit.Success<Stream.Stream<ChatEvent>>).value)
      const failed = yield* collect(yield* actors.reply(chatIn(C1, "fails")))
      const died = yield* collect(yield* actors.reply(chatIn(C1, "dies")))
      const next = yield* collect(yield* actors.reply(chatIn(C1, "still here")))
      return { admitted: refused.map(Exit.isSuccess), first, failed, died, next }
    }))
    expect(fake.admissions.slice(0, 4)).toEqual(["first", "second", "third", "fourth"])
    expect(result).toEqual({
      admitted: [true, false, false, false],
      first: ["token", "done"],
      failed: ["token", "error"],
      died: ["token", "error"],
      next: ["token", "done"]
    })
    expect(fake.pending()).toBe(0)
  })

  it("what is left pending keeps the reason the events give: a failed or defective reply, the service shutting down", async () => {
    const fake = fakeWork()
    const reasons: Array<string> = []
    const work: ConversationWork<never> = {
      ...fake.work,
      failPending: (owned, reason) => Effect.andThen(Effect.sync(() => reasons.push(reason)), fake.work.failPending(owned, reason))
    }
    fake.open(C1)
    fake.plans.set("fails", { ending: "fails", sleep: 0 })
    fake.plans.set("dies", { ending: "dies", sleep: 0 })
    const never = Effect.runSync(Deferred.make<void>())
    fake.plans.set("forever", { ending: "text", sleep: 0, gate: never })
    const errorOf = (events: Stream.Stream<ChatEvent>) =>
      Effect.map(Stream.runCollect(events), (all) => Array.from(all).flatMap((event) => (event.event === "error" ? [event.data.error] : [])))
    const { failed, died, forever } = await run(Effect.gen(function*() {
      const actors = yield* makeConversationActors(work)
      const failed = yield* errorOf(yield* actors.reply(chatIn(C1, "fails")))
      const died = yield* errorOf(yield* actors.reply(chatIn(C1, "dies")))
      const forever = yield* actors.reply(chatIn(C1, "forever"))
      yield* until(() => fake.running() === 1)
      return { failed, died, forever }
    }))
    const shutDown = await Effect.runPromise(errorOf(forever))
    expect([failed, died, shutDown]).toEqual([["the reply failed"], ["the reply failed"], ["the service is shutting down"]])
    expect(reasons).toEqual([...failed, ...died, ...shutDown])
    expect(fake.pending()).toBe(0)
  })

  it("property: concurrent chat/stop/attach on one conversation: every attacher sees its reply's events as its caller does, a stop ends one running reply, no reply starts but by chat", async () => {
    const operation = fc.record({
      kind: fc.constantFrom("chat", "stop", "attach", "attach"),
      sleep: fc.integer({ min: 0, max: 4 }),
      stagger: fc.integer({ min: 0, max: 6 })
    })
    await fc.assert(
      fc.asyncProperty(fc.array(operation, { minLength: 1, maxLength: 14 }), async (operations) => {
        const fake = fakeWork()
        fake.open(C1)
        const owned = { userId: caller.userId, conversationId: C1 }
        const outcome = await run(Effect.gen(function*() {
          const actors = yield* makeConversationActors(fake.work)
          return yield* Effect.forEach(operations, (operation, index) => {
            fake.plans.set(`chat ${index}`, { ending: "text", sleep: operation.sleep })
            type Answer =
              | { readonly kind: "chat"; readonly events: Array<ChatEvent> }
              | { readonly kind: "stop"; readonly stopped: boolean }
              | { readonly kind: "attach"; readonly events: Array<ChatEvent> | undefined }
            const call: Effect.Effect<Answer, ReplyRefused> = operation.kind === "chat"
              ? Effect.map(Effect.flatMap(actors.reply(chatIn(C1, `chat ${index}`)), Stream.runCollect), (events) => ({ kind: "chat" as const, events: Array.from(events) }))
              : operation.kind === "stop"
              ? Effect.map(actors.stop(owned), (stopped) => ({ kind: "stop" as const, stopped }))
              : Effect.map(
                Effect.flatMap(actors.attach(owned), (attached) =>
                  Option.isNone(attached) ? Effect.succeed(undefined) : Effect.map(Stream.runCollect(attached.value), (events) => Array.from(events))),
                (events) => ({ kind: "attach" as const, events })
              )
            return Effect.andThen(Effect.sleep(`${operation.stagger} millis`), Effect.exit(call))
          }, { concurrency: "unbounded" })
        }))
        const done = outcome.flatMap((exit) => (Exit.isSuccess(exit) ? [exit.value] : []))
        const replies = new Map<string, ReadonlyArray<ChatEvent>>()
        for (const answer of done) if (answer.kind === "chat") replies.set(String((answer.events[0]?.data as { text: string }).text), answer.events)
        // Only chat starts a reply: stop and attach never do.
        expect(fake.admissions.every((admitted) => admitted.startsWith("chat "))).toBe(true)
        expect(replies.size).toBe(fake.admissions.length - outcome.filter((exit, index) => operations[index]!.kind === "chat" && Exit.isFailure(exit)).length)
        for (const answer of done) {
          if (answer.kind !== "attach" || answer.events === undefined) continue
          // From the reply's first event to its end: the very events its caller read.
          const name = String((answer.events[0]?.data as { text: string }).text)
          expect(answer.events).toEqual(replies.get(name))
        }
        // Each stopped reply ends with a stopped `done`; it was stopped by a stop that said so; nothing else ended that way.
        const stoppedEnds = [...replies.values()].filter((events) => (events.at(-1)?.data as { stopped?: boolean }).stopped === true)
        expect(stoppedEnds.length).toBe(fake.stoppedReplies.length)
        const stops = done.filter((answer) => answer.kind === "stop" && answer.stopped).length
        expect(fake.stoppedReplies.length).toBeLessThanOrEqual(stops)
        if (stops > 0) expect(fake.stoppedReplies.length).toBeGreaterThan(0)
        expect(fake.overlaps()).toBe(0)
        expect(fake.pending()).toBe(0)
        outcome.forEach((exit) => expect(expectedRefusal(exit), String(exit)).toBe(true))
      }),
      { numRuns: 60 }
    )
  })

  it("stop ends the running reply: its events end with a stopped done, the conversation takes the next chat; with none running it answers false", async () => {
    const fake = fakeWork()
    fake.open(C1)
    const never = Effect.runSync(Deferred.make<void>())
    fake.plans.set("forever", { ending: "text", sleep: 0, gate: never })
    const owned = { userId: caller.userId, conversationId: C1 }
    const result = await run(Effect.gen(function*() {
      const actors = yield* makeConversationActors(fake.work)
      const idle = yield* actors.stop(owned)
      const events = yield* actors.reply(chatIn(C1, "forever"))
      const attached = yield* actors.attach(owned)
      const someoneElse = yield* actors.stop({ ...owned, userId: "00000000-0000-4000-8000-0000000000bb" })
      const stopped = yield* actors.stop(owned)
      const afterwards = yield* actors.attach(owned)
      const next = yield* collect(yield* actors.reply(chatIn(C1, "next")))
      return {
        idle,
        someoneElse,
        stopped,
        events: yield* collect(events),
        attached: Option.isSome(attached) ? yield* collect(attached.value) : [],
        afterwards: Option.isSome(afterwards),
        next
      }
    }))
    expect(result).toEqual({
      idle: false,
      someoneElse: false,
      stopped: true,
      events: ["token", "done"],
      attached: ["token", "done"],
      afterwards: false,
      next: ["token", "done"]
    })
    expect(fake.stoppedReplies).toHaveLength(1)
  })
})
