/**
 * The chat service's routes (spec §4.8): conversations, and replies streamed as Server-Sent
 * Events. chat, continue and execute-tool are the conversation's actor's (ConversationActor): it
 * admits them one at a time and runs each reply and tool call on its own fiber, so a client that
 * disconnects stops nothing; these handlers only ask it and answer.
 */
import { Effect, Layer, Option, Stream } from "effect"
import { Sse } from "effect/encoding"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { ConversationActors } from "../actors/ConversationActor.ts"
import * as Conversations from "../services/Conversations.ts"
import { sqlState } from "../services/DatabaseError.ts"
import { AuthenticationLive, requireRole } from "./Authentication.ts"
import { ChatApi } from "./ChatApi.ts"
import type { ChatEvent } from "./ChatEvents.ts"
import { BadRequest, databaseUnavailable, NotFound, Unauthorized } from "./Errors.ts"
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
