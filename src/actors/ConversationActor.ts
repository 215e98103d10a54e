/**
 * One actor per conversation owns the conversation's work on this instance: chat, continue and
 * execute-tool arrive in its mailbox and are admitted one at a time, in arrival order, by its one
 * fiber; whether a reply may start is the database's decision (sys.begin_turn, which serialises
 * replicas too). An admitted reply or tool run is the actor's, on a fiber in the actor's scope, not
 * the caller's: a client that goes away stops nothing, only the service shutting down interrupts
 * it, and then the actor closes what it left pending. Pieces of work run one after the other.
 *
 * A running reply's events are kept from its first in a replayable hub, so that a caller can be
 * given them from the start at any time (the reply's own request now; a client reattaching later).
 * Stop and attach go through the mailbox too: a stop or an attach that arrives after a chat is
 * about that chat's reply.
 */
import { Cause, Context, Deferred, Duration, Effect, Exit, Fiber, Layer, Option, PubSub, Queue, RcMap, Scope, Stream, type Take } from "effect"
import type { ChatEvent } from "../services/ChatTurn.ts"
import { ConversationNotFound } from "../services/Conversations.ts"
import { isUuid } from "../services/Uuid.ts"
import {
  type ChatWorkServices,
  chatWork,
  type ConversationWork,
  type Emit,
  type ReplyRefused,
  type ReplyRequest,
  type ToolAnswer,
  type ToolDecision,
  type ToolRefused,
  type ToolRunFailed
} from "../services/ConversationWork.ts"
import { PageChecker } from "../services/PageChecker.ts"
import { PlinthConfig } from "../services/PlinthConfig.ts"
import { SqlGuard } from "../services/SqlGuard.ts"

export interface ConversationActorsShape<R> {
  /**
   * chat or continue: once the database has admitted the reply, its events from the first. The
   * reply runs to its end whether or not the stream is read.
   */
  readonly reply: (request: ReplyRequest) => Effect.Effect<Stream.Stream<ChatEvent>, ReplyRefused, R>
  /** execute-tool: the decision, and an approved call's outcome once the actor has run it. */
  readonly executeTool: (decision: ToolDecision) => Effect.Effect<ToolAnswer, ToolRefused | ToolRunFailed, R>
  /**
   * stop: ends the caller's reply running on this instance (it stores its text so far and ends its
   * events with a stopped `done`), answering once it has ended; false when none runs here.
   */
  readonly stop: (reply: RunningReply) => Effect.Effect<boolean>
  /** stream: the caller's reply running on this instance, its events from the first; none when no reply runs here. */
  readonly attach: (reply: RunningReply) => Effect.Effect<Option.Option<Stream.Stream<ChatEvent>>>
}

/** Which reply a stop or an attach is about: the conversation's, if it is the caller's. */
export interface RunningReply {
  readonly userId: string
  readonly conversationId: string
}

type Job<R> =
  | {
    readonly _tag: "Reply"
    readonly request: ReplyRequest
    readonly context: Context.Context<R>
    readonly answer: Deferred.Deferred<Stream.Stream<ChatEvent>, ReplyRefused>
  }
  | {
    readonly _tag: "ExecuteTool"
    readonly decision: ToolDecision
    readonly context: Context.Context<R>
    readonly answer: Deferred.Deferred<ToolAnswer, ToolRefused | ToolRunFailed>
  }
  | { readonly _tag: "Stop"; readonly userId: string; readonly answer: Deferred.Deferred<Option.Option<Fiber.Fiber<void>>> }
  | { readonly _tag: "Attach"; readonly userId: string; readonly answer: Deferred.Deferred<Option.Option<Stream.Stream<ChatEvent>>> }

/** A reply of this conversation: its fiber, and its events from the first (ended by an Exit). */
interface LiveReply {
  /** Whose it is: only they may be given its events. */
  readonly userId: string
  readonly events: PubSub.PubSub<Take.Take<ChatEvent>>
  readonly fiber: Fiber.Fiber<void>
  /** Done once a stop was asked for: the reply ends at its next model call, or at once while the model writes. */
  readonly stop: Deferred.Deferred<void>
}

/** The actor's state; its mutable fields are written by the mailbox's fiber only. */
interface Actor<R> {
  readonly work: ConversationWork<R>
  readonly scope: Scope.Scope
  readonly mailbox: Queue.Queue<Job<R>>
  /** Holds this actor (its registry entry) for the scope it runs in: while work runs, it is not idle. */
  readonly retain: Effect.Effect<void, never, Scope.Scope>
  /** The latest piece of work: the next one starts when it has ended. */
  latest: Fiber.Fiber<void> | undefined
  /** The latest reply (running, or ended since). */
  reply: LiveReply | undefined
}

const MAILBOX_SIZE = 64
/**
 * A reply's events are kept from its first for whoever attaches, up to this many (a bound on the
 * memory a reply holds); an attacher to a longer reply gets its latest ones.
 */
export const REPLAY_EVENTS = 50_000

export const CONVERSATION_IDLE_TIME = Duration.minutes(1)

const FAILED = "the reply failed"
const SHUTTING_DOWN = "the service is shutting down"
const TOOL_FAILED = "the tool call failed"
const failed: ChatEvent = { event: "error", data: { error: FAILED } }
const shuttingDown: ChatEvent = { event: "error", data: { error: SHUTTING_DOWN } }

/**
 * Starts `effect` on a fiber of the actor's scope, with the caller's services. It holds the actor
 * until it ends and gets a scope of its own (not the request's). Started at once, so that its
 * guards are in place even if the actor closes right away.
 */
const startWork = Effect.fnUntraced(function*<R>(actor: Actor<R>, context: Context.Context<R>, effect: Effect.Effect<void, never, R>) {
  const held = yield* Scope.make()
  yield* Scope.provide(actor.retain, held)
  const fiber = yield* effect.pipe(
    Effect.provideContext(Context.add(context, Scope.Scope, held)),
    Effect.ensuring(Scope.close(held, Exit.void)),
    Effect.forkIn(actor.scope, { startImmediately: true })
  )
  actor.latest = fiber
  return fiber
})

/** Waits for the actor's latest piece of work to end: pieces of work run one after the other. */
const afterLatest = <R>(actor: Actor<R>) => (actor.latest === undefined ? Effect.void : Effect.asVoid(Fiber.await(actor.latest)))

/** A reply as the actor runs it (after `ready`): whatever ends it, nothing stays pending and its events end. */
const replyWork = <R>(
  work: ConversationWork<R>,
  request: ReplyRequest,
  ready: Effect.Effect<void>,
  run: (emit: Emit, stop: Deferred.Deferred<void>) => Effect.Effect<void, unknown, R>,
  events: LiveReply["events"],
  stop: Deferred.Deferred<void>
) => {
  const emit: Emit = (event) => Effect.asVoid(PubSub.publish(events, [event]))
  // What is left pending keeps the reason the client's `error` event gives.
  const closePending = (reason: string) =>
    Effect.ignore(work.failPending({ userId: request.context.userId, conversationId: request.conversationId }, reason))
  return Effect.andThen(ready, Effect.suspend(() => run(emit, stop))).pipe(
    Effect.catchCause((cause) => Effect.andThen(Effect.logError("chat reply failed", cause), Effect.andThen(closePending(FAILED), emit(failed)))),
    Effect.onInterrupt(() => Effect.andThen(closePending(SHUTTING_DOWN), emit(shuttingDown))),
    Effect.ensuring(Effect.asVoid(PubSub.publish(events, Exit.void)))
  )
}

/** An approved tool call as the actor runs it (after `ready`): the caller gets the outcome; nothing stays pending. */
const toolWork = <R>(
  work: ConversationWork<R>,
  decision: ToolDecision,
  ready: Effect.Effect<void>,
  run: Effect.Effect<ToolAnswer, ToolRunFailed, R>,
  answer: Deferred.Deferred<ToolAnswer, ToolRefused | ToolRunFailed>
) =>
  Effect.andThen(ready, run).pipe(
    Effect.onError((cause) =>
      Effect.ignore(work.failPending(
        { userId: decision.context.userId, conversationId: decision.conversationId },
        Cause.hasInterruptsOnly(cause) ? SHUTTING_DOWN : TOOL_FAILED
      ))),
    Effect.onExit((exit) => Deferred.done(answer, exit)),
    Effect.exit,
    Effect.asVoid
  )

/** One message of the mailbox: the database's decision, then (if admitted) the work on its fiber. */
const handle = Effect.fnUntraced(function*<R>(actor: Actor<R>, job: Job<R>) {
  if (job._tag === "Reply") {
    const began = yield* Effect.exit(Effect.provideContext(actor.work.begin(job.request), job.context))
    if (Exit.isFailure(began)) return yield* Deferred.failCause(job.answer, began.cause)
    const events = yield* PubSub.unbounded<Take.Take<ChatEvent>>({ replay: REPLAY_EVENTS })
    const stop = yield* Deferred.make<void>()
    const fiber = yield* startWork(actor, job.context, replyWork(actor.work, job.request, afterLatest(actor), began.value, events, stop))
    actor.reply = { userId: job.request.context.userId, events, fiber, stop }
    return yield* Deferred.succeed(job.answer, Stream.fromPubSubTake(events))
  }
  if (job._tag === "Stop" || job._tag === "Attach") {
    const reply = actor.reply
    const running = reply !== undefined && reply.userId === job.userId && reply.fiber.pollUnsafe() === undefined ? reply : undefined
    if (job._tag === "Attach") return yield* Deferred.succeed(job.answer, Option.map(Option.fromUndefinedOr(running), (live) => Stream.fromPubSubTake(live.events)))
    if (running !== undefined) yield* Deferred.succeed(running.stop, undefined)
    return yield* Deferred.succeed(job.answer, Option.map(Option.fromUndefinedOr(running), (live) => live.fiber))
  }
  const decided = yield* Effect.exit(Effect.provideContext(actor.work.decide(job.decision), job.context))
  if (Exit.isFailure(decided)) return yield* Deferred.failCause(job.answer, decided.cause)
  if (decided.value._tag === "Answered") return yield* Deferred.succeed(job.answer, decided.value.answer)
  yield* startWork(actor, job.context, toolWork(actor.work, job.decision, afterLatest(actor), decided.value.run, job.answer))
})

// Defined once: an actor is spawned per conversation (docs/performance-notes.md).
const makeConversationActor = Effect.fnUntraced(function*<R>(work: ConversationWork<R>, retain: Effect.Effect<void, never, Scope.Scope>) {
  const actor: Actor<R> = {
    work,
    scope: yield* Effect.scope,
    mailbox: yield* Queue.bounded<Job<R>>(MAILBOX_SIZE),
    retain,
    latest: undefined,
    reply: undefined
  }
  yield* Effect.forkScoped(Effect.forever(Effect.flatMap(Queue.take(actor.mailbox), (job) =>
    // A caller whose job was cut short by the actor's end gets an answer all the same.
    Effect.onInterrupt(handle(actor, job), () => Deferred.interrupt(job.answer as Deferred.Deferred<unknown, unknown>)))))
  return actor
})

/** The registry of conversation actors: spawned on demand, stopped once idle (no caller, no work). */
export const makeConversationActors = <R>(work: ConversationWork<R>) =>
  Effect.gen(function*() {
    const actors: RcMap.RcMap<string, Actor<R>> = yield* RcMap.make({
      lookup: (conversationId: string) => makeConversationActor(work, Effect.asVoid(RcMap.get(actors, conversationId))),
      idleTimeToLive: CONVERSATION_IDLE_TIME
    })
    const ask = <A, E>(conversationId: string, job: (answer: Deferred.Deferred<A, E>) => Job<R>) =>
      Effect.scoped(Effect.flatMap(RcMap.get(actors, conversationId), (actor) =>
        Effect.flatMap(Deferred.make<A, E>(), (answer) => Effect.andThen(Queue.offer(actor.mailbox, job(answer)), Deferred.await(answer)))))
    // Combinators, not generators written inline per call.
    const shape: ConversationActorsShape<R> = {
      reply: (request) =>
        isUuid(request.conversationId)
          ? Effect.contextWith((context: Context.Context<R>) =>
            ask<Stream.Stream<ChatEvent>, ReplyRefused>(request.conversationId, (answer) => ({ _tag: "Reply", request, context, answer }))
          )
          : Effect.fail(new ConversationNotFound()),
      executeTool: (decision) =>
        isUuid(decision.conversationId)
          ? Effect.contextWith((context: Context.Context<R>) =>
            ask<ToolAnswer, ToolRefused | ToolRunFailed>(decision.conversationId, (answer) => ({ _tag: "ExecuteTool", decision, context, answer }))
          )
          : Effect.fail(new ConversationNotFound()),
      stop: (reply) =>
        isUuid(reply.conversationId)
          ? Effect.flatMap(
            ask<Option.Option<Fiber.Fiber<void>>, never>(reply.conversationId, (answer) => ({ _tag: "Stop", userId: reply.userId, answer })),
            Option.match({ onNone: () => Effect.succeed(false), onSome: (fiber) => Effect.as(Fiber.await(fiber), true) })
          )
          : Effect.succeed(false),
      attach: (reply) =>
        isUuid(reply.conversationId)
          ? ask<Option.Option<Stream.Stream<ChatEvent>>, never>(reply.conversationId, (answer) => ({ _tag: "Attach", userId: reply.userId, answer }))
          : Effect.succeed(Option.none())
    }
    return shape
  })

export class ConversationActors extends Context.Service<ConversationActors, ConversationActorsShape<ChatWorkServices>>()("plinth/ConversationActors") {
  static readonly layer = Layer.effect(ConversationActors, Effect.gen(function*() {
    const config = yield* PlinthConfig
    const guard = yield* SqlGuard
    const pages = yield* PageChecker
    const work: ConversationWork<ChatWorkServices> = chatWork({ guard, pages, maxSteps: config.chatMaxSteps })
    return ConversationActors.of(yield* makeConversationActors(work))
  }))
}
