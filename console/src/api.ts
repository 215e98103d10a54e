/**
 * The console's calls, through `plinth/client` only: one client per app (its `X-App-Schema`) for the
 * signed-in user, a 401 anywhere ending the session, and every failure said in words.
 */
import { type AsyncPlinthClient, type ChatEvent, createPlinthClient } from "plinth/client"
import { session } from "./session.ts"


export interface ConsoleConfig {
  readonly chatUrl: string
  readonly challengeSiteKey: string | null
  readonly passwordSignIn: boolean
  readonly multiTenant: boolean
}

/** Where the chat service is (config.json's chatUrl), once the configuration is loaded. */
let chatUrl: string | undefined

export const loadConfig = async (): Promise<ConsoleConfig> => {
  const response = await fetch("/console/config.json")
  if (!response.ok) throw new Error(`config.json: ${response.status}`)
  const config = (await response.json()) as ConsoleConfig
  chatUrl = config.chatUrl
  clients.clear()
  return config
}

const clients = new Map<string, AsyncPlinthClient>()
session.subscribe(() => clients.clear())

/** A client of the main service (and of the chat service) for the signed-in user (or nobody), in `appSchema` (and the tab's tenant, when there is one). */
export const clientFor = (appSchema = "public"): AsyncPlinthClient => {
  let client = clients.get(appSchema)
  if (client === undefined) {
    const token = session.get()?.token
    const tenant = session.tenant()
    client = createPlinthClient({
      url: location.origin,
      ...(chatUrl === undefined ? {} : { chatUrl }),
      ...(token === undefined ? {} : { token }),
      ...(appSchema === "public" ? {} : { appSchema }),
      ...(tenant === null ? {} : { tenant })
    })
    clients.set(appSchema, client)
  }
  return client
}

export const SESSION_ENDED = "Your session has ended. Please sign in again."

const tagOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "_tag" in error && typeof error._tag === "string" ? error._tag : undefined

/** A call as the signed-in user: a 401 signs them out (the token is no good any more). */
export const call = async <A>(use: (client: AsyncPlinthClient) => Promise<A>, appSchema?: string): Promise<A> => {
  try {
    return await use(clientFor(appSchema))
  } catch (error) {
    if (tagOf(error) === "Unauthorized" && session.get() !== null) session.signOut(SESSION_ENDED)
    throw error
  }
}

/** `POST /sql` in `appSchema`: its rows. */
export const sql = async (statement: string, params: ReadonlyArray<unknown> = [], appSchema?: string) =>
  (await call((client) => client.sql(statement, params), appSchema)).rows

/** A page's query: one SELECT the server runs only if it reads, in a read-only transaction (docs/pages.md). */
export const pageQuery = async (statement: string, params: ReadonlyArray<unknown>, appSchema: string) =>
  (await call((client) => client.sql(statement, params, { readOnly: true }), appSchema)).rows

/** POST / in `appSchema`: the relations, keys, stats and metadata the user may see. */
export const introspect = (appSchema: string) => call((client) => client.run((c) => c.mainApi.introspection.introspect({ payload: {} })), appSchema)
export type Introspection = Awaited<ReturnType<typeof introspect>>

/** The chat service: the caller's conversations, newest first. */
export const listConversations = () => call((client) => client.run((c) => c.chatApi.conversations.list()))
export type ConversationSummary = Awaited<ReturnType<typeof listConversations>>[number]

/** A conversation with its messages. */
export const getConversation = (id: string) => call((client) => client.run((c) => c.chatApi.conversations.get({ params: { id } })))
export type Conversation = Awaited<ReturnType<typeof getConversation>>
export type ChatMessage = Conversation["messages"][number]

/** A new conversation, untitled: its first message names it. */
export const createConversation = () => call((client) => client.run((c) => c.chatApi.conversations.create({ payload: { title: "" } })))

export const deleteConversation = (id: string) => call((client) => client.run((c) => c.chatApi.conversations.delete({ params: { id } })))

/** Ends the conversation's running reply on the server; none running is not a failure. */
export const stopReply = (id: string) =>
  call((client) => client.stop(id)).catch((error: unknown) => {
    if (tagOf(error) !== "Conflict") throw error
  })

/** A reply's events (chat, continue or stream) in `appSchema`; a 401 ends the session as `call` does. */
export async function* replyEvents(start: (client: AsyncPlinthClient) => AsyncIterable<ChatEvent>, appSchema: string): AsyncIterable<ChatEvent> {
  try {
    yield* start(clientFor(appSchema))
  } catch (error) {
    if (tagOf(error) === "Unauthorized" && session.get() !== null) session.signOut(SESSION_ENDED)
    throw error
  }
}

/** GET /admin/users. */
export const listUsers = () => call((client) => client.run((c) => c.mainApi.users.list()))
export type UserAccount = Awaited<ReturnType<typeof listUsers>>[number]

/** GET /admin/audit: the newest `limit` events. */
export const listAuditEvents = (limit: number) => call((client) => client.run((c) => c.mainApi.audit.listAuditEvents({ query: { limit } })))
export type AuditEvent = Awaited<ReturnType<typeof listAuditEvents>>["events"][number]

const plural = (count: number, word: string) => `${count} ${word}${count === 1 ? "" : "s"}`

/** A wait in seconds, as a person says it. */
export const waitWords = (seconds: number): string =>
  seconds >= 90 ? plural(Math.ceil(seconds / 60), "minute") : plural(Math.max(1, Math.round(seconds)), "second")

const sentence = (text: string) => {
  const trimmed = text.trim()
  if (trimmed === "") return "Something went wrong."
  const first = trimmed.charAt(0).toUpperCase() + trimmed.slice(1)
  return /[.!?]$/.test(first) ? first : `${first}.`
}

/** The HTTP status of a failure the endpoint does not declare (the client's HttpClientError with a response), if any. */
export const statusOf = (error: unknown): number | undefined => {
  const reason = typeof error === "object" && error !== null && "reason" in error ? error.reason : undefined
  const response = typeof reason === "object" && reason !== null && "response" in reason ? reason.response : undefined
  return typeof response === "object" && response !== null && "status" in response && typeof response.status === "number" ? response.status : undefined
}

/** A failed call, in words (what went wrong and, where there is one, what to do). */
export const describe = (error: unknown): string => {
  const tag = tagOf(error)
  const fields = (typeof error === "object" && error !== null ? error : {}) as { error?: unknown; retryAfterSeconds?: unknown; message?: unknown }
  if (tag === "TooManyRequests") {
    const wait = typeof fields.retryAfterSeconds === "number" ? fields.retryAfterSeconds : 60
    return `Too many attempts. Please try again in ${waitWords(wait)}.`
  }
  if (typeof fields.error === "string") return sentence(fields.error)
  if (typeof fields.error === "object" && fields.error !== null && "message" in fields.error && typeof fields.error.message === "string") {
    return sentence(fields.error.message)
  }
  if (tag === "Unauthorized") return SESSION_ENDED
  const status = statusOf(error)
  if (tag === "HttpClientError" && status !== undefined) return `The server answered with an error (HTTP ${status}). Please try again.`
  if (tag === "HttpClientError" || error instanceof TypeError) return "The server could not be reached. Please check your connection and try again."
  return sentence(typeof fields.message === "string" ? fields.message : String(error))
}

/** The error's tag (`Unauthorized`, `Forbidden`, `TooManyRequests`, ...), to word some cases for their screen. */
export const errorTag = tagOf
