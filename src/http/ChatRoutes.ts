/**
 * The chat service's routes (spec §4.8): conversations, and replies streamed as Server-Sent
 * Events. A reply starts inside the conversation's mailbox (ConversationActor) and its database
 * lock; once started it runs on a fiber of the service, so a client that disconnects does not
 * stop it: the reply finishes and is stored, and nothing is left pending.
 */
import { type Cause, Effect, Fiber, FiberSet, Layer, Option, Queue, Stream } from "effect"
import { Sse } from "effect/encoding"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import type { SqlClient } from "effect/sql"
import { ConversationActors } from "../actors/ConversationActor.ts"
import { runTool, ToolFailed } from "../services/ChatTools.ts"
import { type ChatEvent, runTurn } from "../services/ChatTurn.ts"
import * as Conversations from "../services/Conversations.ts"
import { sqlState } from "../services/DatabaseError.ts"
import { PlinthConfig } from "../services/PlinthConfig.ts"
import type { RequestContext } from "../services/RequestContext.ts"
import { SqlGuard } from "../services/SqlGuard.ts"
import { AuthenticationLive, requireRole } from "./Authentication.ts"
import { ChatApi } from "./ChatApi.ts"
import { BadRequest, databaseUnavailable, NotFound, Unauthorized } from "./Errors.ts"
import { resolveRequestContext } from "./RequestContextResolver.ts"
import { health, ready } from "./SystemRoutes.ts"
import { ValidationErrorsLive } from "./Validation.ts"

const SystemHandlers = HttpApiBuilder.group(ChatApi, "system", (handlers) => handlers.handle("health", health).handle("ready", ready))

/** Spec §4.8: owners and admins only. */
const manager = requireRole(["owner", "admin"])

const frame = (event: ChatEvent) =>
  Sse.encoder.write({ _tag: "Event", event: event.event, id: undefined, data: JSON.stringify(event.data) })

const notFound = () => new NotFound({ error: "conversation not found" })

/**
 * Streams a started reply. The reply runs in the service's set of replies, not on the request:
 * it completes whether or not the client stays; only the service shutting down interrupts it,
 * and then its pending messages are marked `error` rather than left pending.
 */
const streamReply = <R>(
  replies: FiberSet.FiberSet<void, never>,
  owned: Conversations.OwnedConversation,
  run: (emit: (event: ChatEvent) => Effect.Effect<void>) => Effect.Effect<void, unknown, R>
) =>
  // Combinators, not a generator written inline per call (StatementConnections' roundTrip says why).
  Effect.flatMap(Queue.unbounded<ChatEvent, Cause.Done>(), (events) => {
    const emit = (event: ChatEvent) => Effect.asVoid(Queue.offer(events, event))
    const closePending = Conversations.failPending(owned).pipe(Effect.ignore)
    const guarded = run(emit).pipe(
      Effect.catchCause((cause) =>
        Effect.andThen(
          Effect.logError("chat reply failed", cause),
          Effect.andThen(closePending, emit({ event: "error", data: { error: "the reply failed" } }))
        )
      ),
      Effect.onInterrupt(() => Effect.andThen(closePending, emit({ event: "error", data: { error: "the service is shutting down" } }))),
      Effect.ensuring(Queue.end(events))
    )
    return Effect.as(
      FiberSet.run(replies, guarded),
      HttpServerResponse.stream(Stream.encodeText(Stream.map(Stream.fromQueue(events), frame)), {
        contentType: "text/event-stream",
        headers: { "cache-control": "no-cache", "x-accel-buffering": "no" }
      })
    )
  })

const ConversationHandlers = HttpApiBuilder.group(ChatApi, "conversations", Effect.fn(function*(handlers) {
  const config = yield* PlinthConfig
  const guard = yield* SqlGuard
  const actors = yield* ConversationActors
  // Replies (and approved tool runs) in flight; closing the service interrupts them.
  const replies = yield* FiberSet.make<void, never>()
  const executions = yield* FiberSet.make<unknown, unknown>()

  /** The caller as tools run them: role, user, and the app of X-App-Schema. */
  const callerContext = (request: HttpServerRequest.HttpServerRequest) =>
    Effect.flatMap(manager, (principal) => resolveRequestContext(principal, request))

  const beginAndStream = (
    conversationId: string,
    context: RequestContext,
    start: Conversations.TurnStart
  ) =>
    actors.exclusive(conversationId, Conversations.beginTurn(context.userId, conversationId, start)).pipe(
      Effect.catchTags({
        ConversationNotFound: () => Effect.fail(notFound()),
        TurnRefused: (refused) => Effect.fail(new BadRequest({ error: refused.message }))
      }),
      Effect.flatMap((started) =>
        streamReply(replies, { userId: context.userId, conversationId }, (emit) =>
          runTurn({
            context,
            conversationId,
            placeholderId: started.placeholderId,
            history: started.history,
            titleFrom: started.firstMessage && start.kind === "chat" ? Option.some(start.content) : Option.none(),
            maxSteps: config.chatMaxSteps,
            guard,
            emit
          })))
    )

  return handlers
    .handle("list", () =>
      Effect.gen(function*() {
        const principal = yield* manager
        return yield* Conversations.listConversations(principal.userId)
      }).pipe(databaseUnavailable))
    .handle("create", ({ payload }) =>
      Effect.gen(function*() {
        const principal = yield* manager
        return yield* Conversations.createConversation(principal.userId, payload.title).pipe(
          // A valid token of a user who is gone (deleted after it was issued).
          Effect.catchIf(
            (error) => sqlState(error) === "23503",
            () => Effect.fail(new Unauthorized({ error: "unknown user" }))
          )
        )
      }).pipe(databaseUnavailable))
    .handle("get", ({ params }) =>
      Effect.gen(function*() {
        const principal = yield* manager
        const found = yield* Conversations.getConversation(principal.userId, params.id)
        if (Option.isNone(found)) return yield* notFound()
        return found.value
      }).pipe(databaseUnavailable))
    .handle("delete", ({ params }) =>
      Effect.gen(function*() {
        const principal = yield* manager
        if (!(yield* Conversations.deleteConversation(principal.userId, params.id))) return yield* notFound()
      }).pipe(databaseUnavailable))
    .handle("chat", ({ params, payload, request }) =>
      Effect.flatMap(callerContext(request), (context) => beginAndStream(params.id, context, { kind: "chat", content: payload.content })).pipe(
        databaseUnavailable
      ))
    .handle("continue", ({ params, request }) =>
      Effect.flatMap(callerContext(request), (context) => beginAndStream(params.id, context, { kind: "continue" })).pipe(databaseUnavailable))
    .handle("executeTool", ({ params, payload, request }) =>
      Effect.gen(function*() {
        const context = yield* callerContext(request)
        // Claimed inside the mailbox: a second call finds the message no longer pending_approval.
        const claimed = yield* actors.exclusive(params.id, Conversations.claimApproval(context.userId, params.id, payload.message_id)).pipe(
          Effect.catchTags({
            ConversationNotFound: () => Effect.fail(notFound()),
            MessageNotFound: () => Effect.fail(new NotFound({ error: "message not found" })),
            TurnRefused: (refused) => Effect.fail(new BadRequest({ error: refused.message }))
          })
        )
        if (claimed._tag === "AlreadyProcessed") return { status: claimed.status, already_processed: true }
        const owned = { userId: context.userId, conversationId: params.id }
        const call = claimed.call
        if (payload.approved === false) {
          yield* Conversations.saveMessage(owned, claimed.message.id, { ...claimed.content, tool_result: { result: "rejected by the user" } }, "rejected")
          return { status: "rejected" as const, result: null, error: null }
        }
        const args = payload.modified_args ?? call.args
        // The claimed message is `pending` until this ends: run it on its own fiber, so that a
        // client that goes away cannot leave it pending for good.
        const execution = Effect.gen(function*() {
          const outcome = yield* Effect.result(runTool(guard, context, call.name, args))
          const toolResult = outcome._tag === "Success" ? { result: outcome.success } : { error: (outcome.failure as ToolFailed).message }
          yield* Conversations.saveMessage(
            owned,
            claimed.message.id,
            { ...claimed.content, tool_calls: [{ ...call, args }], tool_result: toolResult },
            outcome._tag === "Success" ? "complete" : "error"
          )
          return outcome
        }).pipe(Effect.onError(() => Conversations.failPending(owned).pipe(Effect.ignore)))
        const outcome = yield* Fiber.join(yield* FiberSet.run(executions, execution))
        return outcome._tag === "Success"
          ? { status: "complete" as const, result: outcome.success, error: null }
          : { status: "error" as const, result: null, error: (outcome.failure as ToolFailed).message }
      }).pipe(Effect.catchTag("ConversationNotFound", () => Effect.fail(notFound())), databaseUnavailable))
}))

export const ChatRoutes = HttpApiBuilder.layer(ChatApi, { openapiPath: "/openapi.json" }).pipe(
  Layer.provide([SystemHandlers, ConversationHandlers]),
  Layer.provide([ValidationErrorsLive, AuthenticationLive])
)
