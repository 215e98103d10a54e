/**
 * Helpers of the chat service's integration tests: scripted model turns that cannot leak from one
 * test into the next, the database as a superuser sees it, the main service's /sql, reading the
 * requests the fake model received, and a delaying proxy in front of the fake model (to keep a
 * reply streaming long enough for a disconnect or a concurrent call to land in the middle of it).
 */
import { createServer, request as httpRequest } from "node:http"
import type { AddressInfo } from "node:net"
import { expect } from "vitest"
import { post, type SignIn } from "../support/auth.ts"
import { type ChatStack, postSse, type SseEvent, type SseReply } from "../support/chat.ts"
import { query } from "../support/database.ts"
import type { FakeAnthropic, RecordedRequest, ScriptedTurn } from "../support/FakeAnthropic.ts"
import { get } from "../support/http.ts"

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

// ---------------------------------------------------------------------------------------------
// Scripted turns

export interface Turns {
  /** Queue streamed replies (the model's turns); title requests never consume them. */
  readonly push: (...turns: ReadonlyArray<ScriptedTurn>) => void
  /** Decides every streamed reply while set (the step-bound test's endless tool calls). */
  readonly always: (decide: ((request: RecordedRequest) => ScriptedTurn) | undefined) => void
  readonly left: () => number
  readonly reset: () => void
}

/**
 * A queue of the streamed replies only: the title of a first message is a second, non-streaming
 * request, which falls through to the fake's default answer ("ok").
 */
export const scriptedTurns = (model: FakeAnthropic): Turns => {
  const queue: Array<ScriptedTurn> = []
  let decide: ((request: RecordedRequest) => ScriptedTurn) | undefined
  model.respondWith((request) => {
    if (request.body.stream !== true) return undefined
    if (decide !== undefined) return decide(request)
    return queue.shift()
  })
  return {
    push: (...turns) => {
      queue.push(...turns)
    },
    always: (next) => {
      decide = next
    },
    left: () => queue.length,
    reset: () => {
      queue.length = 0
      decide = undefined
    }
  }
}

export const text = (value: string): ScriptedTurn => ({ kind: "reply", blocks: [{ type: "text", text: value }] })
export const toolUse = (id: string, name: string, input: unknown, before?: string): ScriptedTurn => ({
  kind: "reply",
  blocks: [...(before === undefined ? [] : [{ type: "text" as const, text: before }]), { type: "tool_use", id, name, input }]
})

// ---------------------------------------------------------------------------------------------
// Requests the model received

export interface ContentBlock {
  readonly type: string
  readonly [key: string]: unknown
}

export const blocksOf = (content: unknown): ReadonlyArray<ContentBlock> =>
  typeof content === "string" ? [{ type: "text", text: content }] : Array.isArray(content) ? (content as Array<ContentBlock>) : []

/** The streamed (reply) requests only, from index `from` of `model.requests`. */
export const replyRequests = (model: FakeAnthropic, from = 0) => model.requests.slice(from).filter((request) => request.body.stream === true)

/** The tool_result blocks of a request's last message (the user turn answering the tool_uses). */
export const lastToolResults = (request: RecordedRequest) => {
  const last = request.body.messages.at(-1)
  expect(last?.role).toBe("user")
  return blocksOf(last?.content).filter((block) => block.type === "tool_result") as unknown as ReadonlyArray<
    ContentBlock & { readonly tool_use_id: string; readonly content: string; readonly is_error?: boolean }
  >
}

// ---------------------------------------------------------------------------------------------
// SSE replies

export const names = (reply: SseReply) => reply.events.map((event) => event.event)
export const visibleNames = (reply: SseReply) => names(reply).filter((name) => name !== "token")
export const tokensOf = (reply: SseReply) => reply.events.filter((event) => event.event === "token").map((event) => String(event.data["text"])).join("")
export const eventsNamed = (reply: SseReply, name: string): ReadonlyArray<SseEvent> => reply.events.filter((event) => event.event === name)

export interface DoneData {
  readonly message: { readonly id: string; readonly role: string; readonly status: string; readonly content: Record<string, unknown> }
  readonly streaming_continues?: boolean
  readonly tool_result?: Record<string, unknown>
}
export const doneEvents = (reply: SseReply) => eventsNamed(reply, "done").map((event) => event.data as unknown as DoneData)

export const chat = (stack: ChatStack, user: SignIn, conversationId: string, content: string, headers: Record<string, string> = {}) =>
  postSse(stack.chat.url, `/conversations/${conversationId}/chat`, { content }, { token: user.token, headers })

export const continueTurn = (base: string, user: SignIn, conversationId: string, headers: Record<string, string> = {}) =>
  postSse(base, `/conversations/${conversationId}/continue`, undefined, { token: user.token, headers })

/**
 * Starts a reply and disconnects as soon as its first token arrives, as a client that leaves
 * mid-reply: its status and what it had read by then.
 */
export const chatUntilFirstToken = async (stack: ChatStack, user: SignIn, conversationId: string, content: string) => {
  const controller = new AbortController()
  const response = await fetch(`${stack.chat.url}/conversations/${conversationId}/chat`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${user.token}` },
    body: JSON.stringify({ content }),
    signal: controller.signal
  })
  const reader = response.body!.getReader()
  let seen = ""
  while (!seen.includes("event: token")) {
    const chunk = await reader.read()
    if (chunk.done) break
    seen += new TextDecoder().decode(chunk.value)
  }
  controller.abort()
  await reader.cancel().catch(() => undefined)
  return { status: response.status, seen }
}

// ---------------------------------------------------------------------------------------------
// Conversations as the API and the database show them

export interface StoredMessage {
  readonly id: string
  readonly role: "user" | "assistant"
  readonly content: Record<string, unknown>
  readonly status: string
  readonly created_at: string
}
export interface ConversationBody {
  readonly id: string
  readonly title: string
  readonly created_at: string
  readonly updated_at: string
  readonly messages: ReadonlyArray<StoredMessage>
}

export const getConversation = async (stack: ChatStack, user: SignIn, id: string) => {
  const response = await get<ConversationBody>(stack.chat.url, `/conversations/${id}`, user.token)
  expect(response.status).toBe(200)
  return response.body
}

/** Runs one statement as the superuser: fixtures and effect checks beneath every policy. */
export const admin = <T extends object = Record<string, unknown>>(stack: ChatStack, statement: string, params: ReadonlyArray<unknown> = []) =>
  query(stack.db.adminUrl, (sql) => sql.unsafe<T>(statement, params)) as Promise<ReadonlyArray<T>>

/** Stores a message directly (legacy and mid-loop states the API itself does not create on demand). */
export const insertMessage = async (
  stack: ChatStack,
  conversationId: string,
  role: "user" | "assistant",
  content: Record<string, unknown>,
  status: string
) => {
  const [row] = await admin<{ id: string }>(
    stack,
    "INSERT INTO sys.messages (conversation_id, role, content, status) VALUES ($1, $2, $3::jsonb, $4) RETURNING id::text",
    [conversationId, role, JSON.stringify(content), status]
  )
  return row!.id
}

export const messagesInDatabase = (stack: ChatStack, conversationId: string) =>
  admin<{ id: string; role: string; content: Record<string, unknown>; status: string }>(
    stack,
    "SELECT id::text, role, content, status FROM sys.messages WHERE conversation_id = $1 ORDER BY position",
    [conversationId]
  )

export const pendingIn = async (stack: ChatStack, conversationId: string) =>
  (await admin<{ n: number }>(stack, "SELECT count(*)::int AS n FROM sys.messages WHERE conversation_id = $1 AND status IN ('pending')", [conversationId]))[0]!.n

/** POST /sql on the main service as `user`. */
export const sqlAs = (stack: ChatStack, user: SignIn, statement: string, params: ReadonlyArray<unknown> = [], schema?: string) =>
  post<{ rows: Array<Record<string, unknown>>; rowCount: number }>(stack.main.url, "/sql", { sql: statement, params }, {
    token: user.token,
    ...(schema === undefined ? {} : { headers: { "x-app-schema": schema } })
  })

/** Calls a sys function through the main service and fails the test unless it answers 200. */
export const sysCall = async (stack: ChatStack, user: SignIn, call: string, params: ReadonlyArray<unknown>, schema?: string) => {
  const response = await sqlAs(stack, user, `SELECT ${call} AS result`, params, schema)
  if (response.status !== 200) throw new Error(`${call}: ${response.status} ${JSON.stringify(response.body)}`)
  return response.body.rows[0]!["result"]
}

export const relationExists = async (stack: ChatStack, qualified: string) =>
  (await admin<{ found: boolean }>(stack, "SELECT to_regclass($1) IS NOT NULL AS found", [qualified]))[0]!.found

let counter = 0
/** A name no other test of the run uses. */
export const fresh = (label: string) => `${label}_${process.pid.toString(36)}_${(counter++).toString(36)}`

/** Polls `check` until it returns a value (not undefined) or the time is up. */
export const eventually = async <A>(check: () => Promise<A | undefined>, timeoutMs = 10_000): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error("condition not reached in time")
    await sleep(50)
  }
}

// ---------------------------------------------------------------------------------------------
// A delaying proxy in front of the fake model

export interface SlowProxy {
  readonly url: string
  /** Where requests go (the fake model's URL). */
  target: string
  /** Milliseconds to hold each request before forwarding it. */
  startDelay: number
  /** Milliseconds to wait before passing on each chunk of the answer. */
  chunkDelay: number
  readonly close: () => Promise<void>
}

export const startSlowProxy = async (): Promise<SlowProxy> => {
  const server = createServer(async (incoming, outgoing) => {
    const chunks: Array<Buffer> = []
    for await (const chunk of incoming) chunks.push(chunk as Buffer)
    const body = Buffer.concat(chunks)
    if (proxy.startDelay > 0) await sleep(proxy.startDelay)
    const url = new URL(incoming.url ?? "/", proxy.target)
    const upstream = httpRequest(url, {
      method: incoming.method ?? "POST",
      headers: { ...incoming.headers, host: url.host, "content-length": String(body.length) }
    }, (answer) => {
      outgoing.writeHead(answer.statusCode ?? 502, answer.headers)
      void (async () => {
        try {
          for await (const chunk of answer) {
            if (proxy.chunkDelay > 0) await sleep(proxy.chunkDelay)
            if (outgoing.destroyed) return
            outgoing.write(chunk)
          }
          outgoing.end()
        } catch {
          outgoing.destroy()
        }
      })()
    })
    upstream.on("error", () => outgoing.destroy())
    outgoing.on("close", () => {
      if (!outgoing.writableFinished) upstream.destroy()
    })
    upstream.end(body)
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  const proxy: SlowProxy = {
    url: `http://127.0.0.1:${port}`,
    target: "",
    startDelay: 0,
    chunkDelay: 0,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()))
        server.closeAllConnections()
      })
  }
  return proxy
}

// ---------------------------------------------------------------------------------------------
// An SSE answer read as it arrives

export interface LiveSse {
  readonly status: number
  /** The events so far (JSON answers have none). */
  readonly events: Array<SseEvent>
  /** Settles when the answer has ended. */
  readonly ended: Promise<void>
  readonly close: () => void
}

/** Sends a request and reads its SSE answer event by event, as a browser would. */
export const openSse = async (
  base: string,
  path: string,
  options: { readonly token: string; readonly method?: "GET" | "POST"; readonly body?: unknown }
): Promise<LiveSse> => {
  const controller = new AbortController()
  const response = await fetch(`${base}${path}`, {
    method: options.method ?? "GET",
    headers: { "content-type": "application/json", authorization: `Bearer ${options.token}` },
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
    signal: controller.signal
  })
  const events: Array<SseEvent> = []
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  const ended = (async () => {
    let buffer = ""
    try {
      for (;;) {
        const chunk = await reader.read()
        if (chunk.done) return
        buffer += decoder.decode(chunk.value, { stream: true })
        const frames = buffer.split("\n\n")
        buffer = frames.pop()!
        for (const frame of frames) {
          const event = /^event: (.*)$/m.exec(frame)?.[1]
          if (event === undefined) continue
          events.push({ event, data: JSON.parse(/^data: (.*)$/m.exec(frame)?.[1] ?? "{}") as Record<string, unknown> })
        }
      }
    } catch {
      // Closed by the test.
    }
  })()
  return { status: response.status, events, ended, close: () => controller.abort() }
}

export const liveTokens = (events: ReadonlyArray<SseEvent>) =>
  events.filter((event) => event.event === "token").map((event) => String(event.data["text"])).join("")

/** A model turn that streams `text` and then never ends (until the chat service lets it go). */
export const hangAfter = (text: string): ScriptedTurn => ({ kind: "hang", afterText: text })
