/**
 * The client for code that does not use Effect: promises and async iterables over the Effect client
 * (PlinthClient.ts). A call that fails rejects with the endpoint's tagged error (`Unauthorized`,
 * `BadRequest`, ... from the API definitions: `error._tag`, `error.error`), or with the transport's.
 */
import { Cause, Effect, Exit, Stream } from "effect"
import { FetchHttpClient } from "effect/http"
import type { SignedInUser } from "../http/AuthApi.ts"
import type { ChatEvent } from "../http/ChatEvents.ts"
import type { PageEvent } from "../http/PageEvents.ts"
import { make, type PlinthClient, type PlinthClientOptions } from "./PlinthClient.ts"

export interface SqlResult {
  readonly rows: ReadonlyArray<Readonly<Record<string, unknown>>>
  readonly rowCount: number
}

export interface SignedIn {
  /** The JWT; the client sends it from now on. */
  readonly token: string
  readonly user: typeof SignedInUser.Type
}

export interface AsyncPlinthClient {
  /** The JWT the client sends (set by `signIn`, `login` or `setToken`). */
  readonly token: () => string | undefined
  readonly setToken: (token: string | undefined) => void
  /** POST /auth/magic-link: mails a sign-in link (the `token=` of it goes to `signIn`). */
  readonly requestMagicLink: (email: string) => Promise<void>
  /** POST /auth/magic-link/verify with a link's token; keeps the JWT. */
  readonly signIn: (linkToken: string) => Promise<SignedIn>
  /** POST /auth/login (not in production); keeps the JWT. */
  readonly login: (email: string, password: string) => Promise<SignedIn>
  /** POST /sql as the signed-in user. */
  readonly sql: (sql: string, params?: ReadonlyArray<unknown>, options?: { readonly readOnly?: boolean }) => Promise<SqlResult>
  /** POST /function/:name with positional arguments. */
  readonly call: (name: string, args?: ReadonlyArray<unknown>) => Promise<SqlResult>
  /**
   * GET /events: resolves once the stream is subscribed (no change after that is missed), to the
   * `page_change` and `resync` events until the loop over them stops (`break` closes the stream).
   */
  readonly events: () => Promise<AsyncIterable<PageEvent>>
  /** POST /conversations/:id/chat: the reply's events. */
  readonly chat: (conversationId: string, content: string) => AsyncIterable<ChatEvent>
  /** POST /conversations/:id/continue: the rest of a reply stopped at the step bound. */
  readonly continue: (conversationId: string) => AsyncIterable<ChatEvent>
  /** GET /conversations/:id/stream: the running reply's events from its first (or the latest message's `done`). */
  readonly stream: (conversationId: string) => AsyncIterable<ChatEvent>
  /** POST /conversations/:id/stop: resolves once the running reply has ended; rejects with `Conflict` when none runs. */
  readonly stop: (conversationId: string) => Promise<void>
  /** Any endpoint, through the Effect client: `run((c) => c.chatApi.conversations.list())`. */
  readonly run: <A, E>(call: (client: PlinthClient) => Effect.Effect<A, E>) => Promise<A>
}

/** Runs `effect`; a failure rejects with the error itself (not a wrapper). */
const toPromise = <A, E>(effect: Effect.Effect<A, E>): Promise<A> =>
  Effect.runPromiseExit(effect).then((exit) => (Exit.isSuccess(exit) ? exit.value : Promise.reject(Cause.squash(exit.cause))))

export const createPlinthClient = (options: PlinthClientOptions): AsyncPlinthClient => {
  let current = options
  // Building the client is synchronous work: once per caller, not per call.
  let client = Effect.runSync(Effect.provide(make(current), FetchHttpClient.layer))
  const setToken = (token: string | undefined) => {
    current = { ...current, token }
    client = Effect.runSync(Effect.provide(make(current), FetchHttpClient.layer))
  }
  const run = <A, E>(call: (client: PlinthClient) => Effect.Effect<A, E>) => toPromise(Effect.suspend(() => call(client)))
  const signedIn = (answer: Effect.Effect<SignedIn, unknown>) =>
    toPromise(Effect.tap(answer, (signIn) => Effect.sync(() => setToken(signIn.token))))
  const iterate = <A, E>(stream: () => Stream.Stream<A, E>): AsyncIterable<A> => ({
    [Symbol.asyncIterator]: () => Stream.toAsyncIterable(Stream.suspend(stream))[Symbol.asyncIterator]()
  })
  return {
    token: () => current.token,
    setToken,
    requestMagicLink: (email) => run((c) => Effect.asVoid(c.mainApi.auth.requestMagicLink({ payload: { email } }))),
    signIn: (linkToken) => signedIn(Effect.suspend(() => client.mainApi.auth.verifyMagicLink({ payload: { token: linkToken } }))),
    login: (email, password) => signedIn(Effect.suspend(() => client.mainApi.auth.login({ payload: { email, password } }))),
    sql: (sql, params, options) =>
      run((c) => c.mainApi.data.sql({ payload: { sql, ...(params === undefined ? {} : { params }), ...(options?.readOnly === true ? { readOnly: true } : {}) } })),
    call: (name, args = []) => run((c) => c.mainApi.data.function({ params: { name }, payload: args })),
    events: () => run((c) => c.mainApi.events.events({ query: {} })).then(Stream.toAsyncIterable),
    chat: (conversationId, content) => iterate(() => client.chat(conversationId, content)),
    continue: (conversationId) => iterate(() => client.continue(conversationId)),
    stream: (conversationId) => iterate(() => client.stream(conversationId)),
    stop: (conversationId) => run((c) => c.stop(conversationId)),
    run
  }
}
