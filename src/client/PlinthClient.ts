/**
 * The typed client of both services, for Effect programs: every endpoint as HttpApiClient derives it
 * from the API definitions (its errors as the definitions' tagged failures), and the two event
 * streams as decoded `Stream`s. Built on any `HttpClient` (FetchHttpClient in browsers and Node).
 */
import { Context, Effect, Layer, Stream } from "effect"
import { FetchHttpClient, HttpClient, HttpClientRequest } from "effect/http"
import { HttpApiClient } from "effect/http-api"
import { ChatApi } from "../http/ChatApi.ts"
import { MainApi } from "../http/MainApi.ts"

export interface PlinthClientOptions {
  /** The main service, e.g. `http://127.0.0.1:3000`. */
  readonly url: string
  /** The chat service, e.g. `http://127.0.0.1:3001`; the main service's URL when not given. */
  readonly chatUrl?: string | undefined
  /** The JWT (from signing in) sent as `Authorization: Bearer`. */
  readonly token?: string | undefined
  /** The app whose tables `/sql` and the chat's tools use (`X-App-Schema`); the caller's default app when not given. */
  readonly appSchema?: string | undefined
  /** Multi-tenant deployments: the tenant (`X-Tenant`). */
  readonly tenant?: string | undefined
}

/**
 * Every request of a client carries its caller: the JWT, the app and the tenant; and no tracing
 * headers (`traceparent`, `b3`), which a browser's preflight would refuse since CORS does not list them.
 */
export const withCaller = (options: Pick<PlinthClientOptions, "token" | "appSchema" | "tenant">) =>
(client: HttpClient.HttpClient): HttpClient.HttpClient =>
  HttpClient.mapRequest(withoutTracingHeaders(client), (request) => {
    let next = request
    if (options.token !== undefined) next = HttpClientRequest.bearerToken(next, options.token)
    if (options.appSchema !== undefined) next = HttpClientRequest.setHeader(next, "x-app-schema", options.appSchema)
    if (options.tenant !== undefined) next = HttpClientRequest.setHeader(next, "x-tenant", options.tenant)
    return next
  })

const withoutTracingHeaders = (client: HttpClient.HttpClient): HttpClient.HttpClient =>
  HttpClient.transform(client, (response) => Effect.provideService(response, HttpClient.TracerPropagationEnabled, false))

const makeClients = (options: PlinthClientOptions) =>
  Effect.all({
    main: HttpApiClient.make(MainApi, { baseUrl: options.url, transformClient: withCaller(options) }),
    chat: HttpApiClient.make(ChatApi, { baseUrl: options.chatUrl ?? options.url, transformClient: withCaller(options) })
  })

/** The main service's endpoints, by group: `main.auth.verifyMagicLink(...)`, `main.data.sql(...)`, ... */
export type MainClient = HttpApiClient.ForApi<typeof MainApi>
/** The chat service's endpoints: `chat.conversations.create(...)`, ... */
export type ChatClient = HttpApiClient.ForApi<typeof ChatApi>

const pageEvents = (main: MainClient, token: string | undefined) =>
  Stream.unwrap(main.events.events({ query: token === undefined ? {} : { token } }))
const chatReply = (chat: ChatClient, conversationId: string, content: string) =>
  Stream.unwrap(chat.conversations.chat({ params: { id: conversationId }, payload: { content } }))
const continuedReply = (chat: ChatClient, conversationId: string) =>
  Stream.unwrap(chat.conversations.continue({ params: { id: conversationId } }))
const attachedReply = (chat: ChatClient, conversationId: string) =>
  Stream.unwrap(chat.conversations.stream({ params: { id: conversationId } }))
const stopReply = (chat: ChatClient, conversationId: string) => chat.conversations.stop({ params: { id: conversationId } })

/** The page events of GET /events (`page_change`, `resync`), failing with the errors the endpoint can answer. */
export type PageEvents = ReturnType<typeof pageEvents>
/** The events of one chat reply (`token`, `tool_call`, `status`, `title`, `done`, `error`), failing with the endpoint's errors. */
export type ChatReply = ReturnType<typeof chatReply>

export interface PlinthClient {
  readonly options: PlinthClientOptions
  readonly mainApi: MainClient
  readonly chatApi: ChatClient
  /**
   * GET /events: decoded `page_change` and `resync` events until the stream is closed. With
   * `token`, it goes as `?token=` (the form for clients that cannot set headers) instead of the
   * client's own.
   */
  readonly events: (options?: { readonly token?: string | undefined }) => PageEvents
  /** POST /conversations/:id/chat: the reply to `content`, event by event. */
  readonly chat: (conversationId: string, content: string) => ChatReply
  /** POST /conversations/:id/continue: the rest of a reply that stopped at the step bound. */
  readonly continue: (conversationId: string) => ChatReply
  /**
   * GET /conversations/:id/stream: the running reply's events from its first, then live (a reload
   * or a second tab); when none runs, a `done` with the latest message.
   */
  readonly stream: (conversationId: string) => ChatReply
  /** POST /conversations/:id/stop: ends the running reply on the server (it keeps its text); `Conflict` when none runs. */
  readonly stop: (conversationId: string) => ReturnType<typeof stopReply>
  /** The same client with another caller (e.g. the JWT just received from signing in). */
  readonly withCaller: (caller: Pick<PlinthClientOptions, "token" | "appSchema" | "tenant">) => Effect.Effect<PlinthClient>
}

/** A client of the services at `options.url` / `options.chatUrl`, using the `HttpClient` in context. */
export const make = (options: PlinthClientOptions): Effect.Effect<PlinthClient, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const httpClient = yield* HttpClient.HttpClient
    const { main, chat } = yield* makeClients(options)
    return {
      options,
      mainApi: main,
      chatApi: chat,
      events: (events) => pageEvents(main, events?.token),
      chat: (conversationId, content) => chatReply(chat, conversationId, content),
      continue: (conversationId) => continuedReply(chat, conversationId),
      stream: (conversationId) => attachedReply(chat, conversationId),
      stop: (conversationId) => stopReply(chat, conversationId),
      withCaller: (caller) => Effect.provideService(make({ ...options, ...caller }), HttpClient.HttpClient, httpClient)
    }
  })

/** The client as a service, for programs that `yield* Plinth`. */
export class Plinth extends Context.Service<Plinth, PlinthClient>()("plinth/client/Plinth") {
  /** A client over the platform's `fetch` (browsers, Node 18+, Deno, Bun). */
  static readonly layer = (options: PlinthClientOptions): Layer.Layer<Plinth> =>
    Layer.effect(Plinth, make(options)).pipe(Layer.provide(FetchHttpClient.layer))
}
