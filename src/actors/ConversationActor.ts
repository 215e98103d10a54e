/**
 * One mailbox per conversation: chat, continue and execute-tool of a conversation are admitted
 * one at a time, in arrival order, by a single fiber per conversation. Actors are spawned on
 * demand and stop when idle. Across service instances the database lock of
 * Conversations.beginTurn keeps the same invariant; the actor spares this instance the races.
 */
import { Context, Deferred, Duration, Effect, Layer, Queue, RcMap, type Scope } from "effect"

interface Job {
  readonly run: Effect.Effect<void>
}

export interface ConversationActorShape {
  /** Runs `effect` alone: no other job of this conversation runs until it ends. */
  readonly exclusive: <A, E>(effect: Effect.Effect<A, E>) => Effect.Effect<A, E>
}

const MAILBOX_SIZE = 64

export const makeConversationActor: Effect.Effect<ConversationActorShape, never, Scope.Scope> = Effect.gen(function*() {
  const mailbox = yield* Queue.bounded<Job>(MAILBOX_SIZE)
  yield* Effect.forkScoped(Effect.forever(Effect.flatMap(Queue.take(mailbox), (job) => job.run)))
  return {
    exclusive: <A, E>(effect: Effect.Effect<A, E>) =>
      Effect.flatMap(Deferred.make<A, E>(), (reply) =>
        Effect.andThen(
          Queue.offer(mailbox, { run: Effect.flatMap(Effect.exit(effect), (exit) => Deferred.done(reply, exit)).pipe(Effect.asVoid) }),
          Deferred.await(reply)
        ))
  }
})

export const CONVERSATION_IDLE_TIME = Duration.minutes(1)

export class ConversationActors extends Context.Service<ConversationActors, {
  /** Runs `effect` in the mailbox of `conversationId`, with the caller's services. */
  readonly exclusive: <A, E, R>(conversationId: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}>()("plinth/ConversationActors") {
  static readonly layer = Layer.effect(ConversationActors, Effect.gen(function*() {
    const actors = yield* RcMap.make({ lookup: (_: string) => makeConversationActor, idleTimeToLive: CONVERSATION_IDLE_TIME })
    return ConversationActors.of({
      // Combinators, not a generator written inline per call (StatementConnections' roundTrip says why).
      exclusive: <A, E, R>(conversationId: string, effect: Effect.Effect<A, E, R>) =>
        Effect.contextWith((context: Context.Context<R>) =>
          Effect.flatMap(RcMap.get(actors, conversationId), (actor) => actor.exclusive(Effect.provideContext(effect, context)))
        ).pipe(Effect.scoped)
    })
  }))
}


