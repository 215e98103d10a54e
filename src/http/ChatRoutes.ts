/**
 * The chat service's routes (spec §4.8): conversations, and replies streamed as Server-Sent
 * Events. chat, continue and execute-tool are the conversation's actor's (ConversationActor): it
 * admits them one at a time and runs each reply and tool call on its own fiber, so a client that
 * disconnects stops nothing; these handlers only ask it and answer.
 */
import { Duration, Effect, Layer, Option, Schedule, Stream } from "effect"
import { Sse } from "effect/encoding"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { ConversationActors, type RunningReply } from "../actors/ConversationActor.ts"
import * as Conversations from "../services/Conversations.ts"
import { sqlState } from "../services/DatabaseError.ts"
import { AuthenticationLive, requireRole } from "./Authentication.ts"
import { ChatApi } from "./ChatApi.ts"
import type { ChatEvent } from "./ChatEvents.ts"
import { BadRequest, Conflict, databaseUnavailable, NotFound, Unauthorized, Unavailable } from "./Errors.ts"
import { openApiRoute } from "./OpenApiDocument.ts"
import { resolveRequestContext } from "./RequestContextResolver.ts"
import { health, ready } from "./SystemRoutes.ts"
import { ValidationErrorsLive } from "./Validation.ts"

const SystemHandlers = HttpApiBuilder.group(ChatApi, "system", (handlers) => handlers.handle("health", health).handle("ready", ready))

/** Spec §4.8: owners and admins only. */
const manager = requireRole(["owner", "admin"])

/** Typed by the events' schema (ChatEvents.ts), so what the reply emits is what /openapi.json and the client describe. */
const frame = (event: ChatEvent) =>
  Sse.encoder.write({ _tag: "Event", event: event.event, id: undefined, data: JSON.stringify(event.data) })

const eventStream = (events: Stream.Stream<ChatEvent>) =>
  HttpServerResponse.stream(Stream.encodeText(Stream.map(events, frame)), {
    contentType: "text/event-stream",
    headers: { "cache-control": "no-cache", "x-accel-buffering": "no" }
  })

const notFound = () => new NotFound({ error: "conversation not found" })

/** How often a stop or an attach to a reply on another instance looks whether it has ended. */
const OTHER_INSTANCE_POLL = Duration.seconds(1)
/** How long a stop waits for another instance to end its reply. */
const STOP_ELSEWHERE_WAIT = Duration.seconds(10)

/** The conversation's reply state once no reply runs (polled: the reply runs on another instance); the database's failures end it. */
const untilEnded = (reply: RunningReply) =>
  Conversations.replyState(reply.userId, reply.conversationId).pipe(
    Effect.repeat({ until: (state) => Option.isNone(state) || !state.value.running, schedule: Schedule.spaced(OTHER_INSTANCE_POLL) }),
    Effect.map(Option.getOrElse((): Conversations.ReplyState => ({ latest: undefined, running: false }))),
    Effect.orElseSucceed((): Conversations.ReplyState => ({ latest: undefined, running: false }))
  )

/** What an attacher is told while the reply runs on another instance, whose events it cannot have. */
const elsewhere: ChatEvent = { event: "status", data: { text: "The reply is being written elsewhere; it shows when it is done." } }

/** A finished reply, as GET /stream answers it: one `done` with the latest message (nothing when there is none). */
const latestDone = (state: Conversations.ReplyState): Stream.Stream<ChatEvent> =>
  state.latest === undefined
    ? Stream.empty
    : Stream.make<Array<ChatEvent>>({
      event: "done",
      data: { message: { id: state.latest.id, role: state.latest.role, content: state.latest.content, status: state.latest.status } }
    })

/** The actor's refusals as spec §4.8 answers them. */
const conversationNotFound = () => Effect.fail(notFound())
const messageNotFound = () => Effect.fail(new NotFound({ error: "message not found" }))
const turnRefused = (refused: Conversations.TurnRefused) => Effect.fail(new BadRequest({ error: refused.message }))

const ConversationHandlers = HttpApiBuilder.group(ChatApi, "conversations", Effect.fn(function*(handlers) {
  const actors = yield* ConversationActors

  /** The caller as tools run them: role, user, and the app of X-App-Schema. */
  const callerContext = (request: HttpServerRequest.HttpServerRequest) =>
    Effect.flatMap(manager, (principal) => resolveRequestContext(principal, request))

  const reply = (request: HttpServerRequest.HttpServerRequest, conversationId: string, start: Conversations.TurnStart) =>
    Effect.flatMap(callerContext(request), (context) => actors.reply({ context, conversationId, start })).pipe(
      Effect.map(eventStream),
      Effect.catchTags({ ConversationNotFound: conversationNotFound, TurnRefused: turnRefused }),
      databaseUnavailable
    )

  /**
   * The reply runs here: the actor stops it. Else, if the database says one runs (on another
   * instance), the stop is recorded for that instance to see, and answered once the reply has ended.
   */
  const stopReply = Effect.fnUntraced(function*(reply: RunningReply) {
    if (yield* actors.stop(reply)) return
    const state = yield* Conversations.replyState(reply.userId, reply.conversationId)
    if (Option.isNone(state)) return yield* notFound()
    if (!state.value.running) return yield* new Conflict({ error: "no reply is running" })
    yield* Conversations.askStop(reply)
    // An instance that died cannot stop its reply (the next one to start closes it): the wait is bounded.
    const ended = yield* Effect.timeoutOption(untilEnded(reply), STOP_ELSEWHERE_WAIT)
    if (Option.isNone(ended)) return yield* new Unavailable({ error: "the reply runs on another instance of the chat service, which has not stopped it" })
  })

  /** The reply's events from its first when it runs here; else the latest message once no reply runs (on any instance). */
  const attachReply = Effect.fnUntraced(function*(reply: RunningReply) {
    const attached = yield* actors.attach(reply)
    if (Option.isSome(attached)) return attached.value
    const state = yield* Conversations.replyState(reply.userId, reply.conversationId)
    if (Option.isNone(state)) return yield* notFound()
    if (!state.value.running) return latestDone(state.value)
    // Polled while the client listens; the database's connection is the caller's.
    const context = yield* Effect.context<Effect.Services<ReturnType<typeof untilEnded>>>()
    return Stream.concat(Stream.make<Array<ChatEvent>>(elsewhere), Stream.unwrap(Effect.map(untilEnded(reply), latestDone))).pipe(
      Stream.provideContext(context)
    )
  })

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
    .handle("chat", ({ params, payload, request }) => reply(request, params.id, { kind: "chat", content: payload.content }))
    .handle("continue", ({ params, request }) => reply(request, params.id, { kind: "continue" }))
    .handle("stop", ({ params }) =>
      Effect.flatMap(manager, (principal) => stopReply({ userId: principal.userId, conversationId: params.id })).pipe(databaseUnavailable))
    .handle("stream", ({ params }) =>
      Effect.flatMap(manager, (principal) => attachReply({ userId: principal.userId, conversationId: params.id })).pipe(
        Effect.map(eventStream),
        databaseUnavailable
      ))
    .handle("executeTool", ({ params, payload, request }) =>
      Effect.flatMap(callerContext(request), (context) =>
        actors.executeTool({
          context,
          conversationId: params.id,
          messageId: payload.message_id,
          approved: payload.approved !== false,
          args: Option.fromNullishOr(payload.modified_args)
        })).pipe(
          Effect.catchTags({ ConversationNotFound: conversationNotFound, MessageNotFound: messageNotFound, TurnRefused: turnRefused }),
          databaseUnavailable
        ))
}))

export const ChatRoutes = Layer.mergeAll(
  HttpApiBuilder.layer(ChatApi).pipe(
    Layer.provide([SystemHandlers, ConversationHandlers]),
    Layer.provide([ValidationErrorsLive, AuthenticationLive])
  ),
  openApiRoute(ChatApi, {
    title: "Plinth chat",
    description: "Plinth's chat service: conversations with an AI model that builds the app, for owners and admins; replies stream " +
      "as Server-Sent Events. Errors answer `{error: string}`."
  })
)
