/**
 * A local stand-in for the Anthropic Messages API (`POST /v1/messages`), speaking the wire protocol
 * of `@anthropic-ai/sdk` 1.x, so the chat service is tested with the real SDK pointed at it through
 * `baseURL` (or ANTHROPIC_BASE_URL). Tests queue scripted turns (`script`) or decide them per request
 * (`respondWith`); every POST is recorded with its headers and JSON body.
 *
 * With `"stream": true` the answer is Server-Sent Events, `event: <type>\ndata: <json>\n\n`:
 * message_start, ping, then per content block content_block_start / content_block_delta… /
 * content_block_stop, then message_delta (stop_reason, output usage) and message_stop. Without it,
 * the whole Message as JSON. Errors are `{"type":"error","error":{"type","message"},"request_id"}`
 * with the status, or mid-stream an `event: error` frame.
 *
 * Like the real service, the fake rejects (400 invalid_request_error, without consuming a scripted
 * turn) requests it would never answer: no `anthropic-version`, a body that is not a JSON object,
 * no model / max_tokens / messages, empty text blocks, and tool_use blocks without the matching
 * tool_result in the next message (or tool_results naming no tool_use of the previous message).
 * A request with neither an `x-api-key` nor an `Authorization: Bearer` header gets 401
 * authentication_error. Those requests are still recorded.
 *
 * Retries: the SDK retries 408, 409, 429 and every 5xx (and connection errors, e.g. a `hang` turn
 * cut by the client's `timeout`) twice by default, with backoff, re-sending the same request. Build
 * the client with `maxRetries: 0` when a test scripts a single error, or script one error per
 * attempt (a retry consumes the next turn just as a new request would). A `stream: true` request is
 * retried the same way, but only while no response has started: a `stream_error` is never retried.
 */
import { randomBytes } from "node:crypto"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

export type ScriptedBlock =
  /** Streamed as about `pieces` `text_delta` chunks (3 unless told). */
  | { readonly type: "text"; readonly text: string; readonly pieces?: number }
  /** Streamed as a few `input_json_delta` chunks of `JSON.stringify(input)`; `id` defaults to a fresh `toolu_…`. */
  | { readonly type: "tool_use"; readonly id?: string; readonly name: string; readonly input: unknown }

export type ScriptedTurn =
  /** A message; `stopReason` defaults to `tool_use` when a tool_use block is scripted, else `end_turn`. */
  | {
    readonly kind: "reply"
    readonly blocks: ReadonlyArray<ScriptedBlock>
    readonly stopReason?: "end_turn" | "tool_use" | "max_tokens"
  }
  /** An error answer before any streaming; the error type follows the status unless given (500 api_error, 529 overloaded_error, …). */
  | { readonly kind: "http_error"; readonly status: number; readonly errorType?: string; readonly message?: string }
  /**
   * Starts a stream (message_start, ping, a text block with `afterText` if non-empty), then sends an
   * `event: error` frame (overloaded_error "Overloaded" unless told) and ends the response. To a
   * request without `stream: true` it answers as the HTTP error of that type (529 for overloaded_error).
   */
  | { readonly kind: "stream_error"; readonly afterText?: string; readonly errorType?: string; readonly message?: string }
  /**
   * Accepts the request and never answers (for client timeouts and aborts); `close()` cuts it. With
   * `afterText` (to a `stream: true` request), it first starts the stream and sends that text, then waits.
   */
  | { readonly kind: "hang"; readonly afterText?: string }

export interface RecordedRequest {
  /** Lower-case header names, as Node reports them. */
  readonly headers: Record<string, string | undefined>
  readonly body: {
    model: string
    system?: unknown
    messages: Array<{ role: string; content: unknown }>
    tools?: Array<{ name: string; input_schema: unknown; description?: string }>
    stream?: boolean
    max_tokens: number
    [key: string]: unknown
  }
}

export interface FakeAnthropic {
  /** Base URL for the SDK's `baseURL` / ANTHROPIC_BASE_URL (no trailing `/v1`). */
  readonly url: string
  /** Every POST /v1/messages whose body was a JSON object, in order of arrival (rejected ones included). */
  readonly requests: Array<RecordedRequest>
  /** Queue the next turns; each accepted POST /v1/messages consumes one. With an empty queue: a plain text reply "ok". */
  readonly script: (...turns: ReadonlyArray<ScriptedTurn>) => void
  /** A function deciding the turn from the request, asked before the queue; `undefined` from it falls back to the queue. */
  readonly respondWith: (decide: ((request: RecordedRequest) => ScriptedTurn | undefined) | undefined) => void
  /** Requests neither answered to their end nor let go by the client (a `hang` turn stays open until the client aborts it). */
  readonly open: () => number
  /** Requests the client let go before their answer ended (an aborted `hang`, say). */
  readonly aborted: () => number
  readonly close: () => Promise<void>
}

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/** An id in the real API's style: `prefix` + "01" + 22 base62 characters. */
const randomId = (prefix: string) =>
  prefix + "01" + Array.from(randomBytes(22), (byte) => BASE62[byte % 62]).join("")

const DEFAULT_ERROR_MESSAGES: Record<string, string> = {
  invalid_request_error: "Invalid request",
  authentication_error: "invalid x-api-key",
  billing_error: "Your credit balance is too low to access the Anthropic API.",
  permission_error: "Your API key does not have permission to use the specified resource.",
  not_found_error: "Not found",
  request_too_large: "Request exceeds the maximum allowed number of bytes.",
  rate_limit_error: "Number of requests has exceeded your rate limit.",
  timeout_error: "Request timed out",
  api_error: "Internal server error",
  overloaded_error: "Overloaded"
}

const errorTypeForStatus = (status: number): string => {
  switch (status) {
    case 400:
      return "invalid_request_error"
    case 401:
      return "authentication_error"
    case 402:
      return "billing_error"
    case 403:
      return "permission_error"
    case 404:
      return "not_found_error"
    case 413:
      return "request_too_large"
    case 429:
      return "rate_limit_error"
    case 504:
      return "timeout_error"
    case 529:
      return "overloaded_error"
    default:
      return status >= 500 ? "api_error" : "invalid_request_error"
  }
}

const statusForErrorType = (type: string): number => {
  switch (type) {
    case "invalid_request_error":
      return 400
    case "authentication_error":
      return 401
    case "billing_error":
      return 402
    case "permission_error":
      return 403
    case "not_found_error":
      return 404
    case "request_too_large":
      return 413
    case "rate_limit_error":
      return 429
    case "timeout_error":
      return 504
    case "overloaded_error":
      return 529
    default:
      return 500
  }
}

const errorBody = (type: string, message: string | undefined, requestId: string) => ({
  type: "error",
  error: { type, message: message ?? DEFAULT_ERROR_MESSAGES[type] ?? type },
  request_id: requestId
})

const sendJson = (response: ServerResponse, status: number, requestId: string, body: unknown) => {
  response.writeHead(status, { "content-type": "application/json", "request-id": requestId })
  response.end(JSON.stringify(body))
}

const sendError = (
  response: ServerResponse,
  status: number,
  requestId: string,
  type: string,
  message?: string
) => sendJson(response, status, requestId, errorBody(type, message, requestId))

const readBody = async (request: IncomingMessage): Promise<Buffer> => {
  const chunks: Array<Buffer> = []
  for await (const chunk of request) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

const flatHeaders = (request: IncomingMessage): Record<string, string | undefined> => {
  const headers: Record<string, string | undefined> = {}
  for (const [name, value] of Object.entries(request.headers)) {
    headers[name] = Array.isArray(value) ? value.join(", ") : value
  }
  return headers
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const contentBlocks = (content: unknown): ReadonlyArray<Record<string, unknown>> =>
  Array.isArray(content) ? content.filter(isRecord) : []

/** The checks of the real API that a chat service can plausibly trip over; a message, or undefined when valid. */
const invalidRequest = (body: Record<string, unknown>): string | undefined => {
  if (typeof body["model"] !== "string" || body["model"] === "") return "model: Field required"
  const maxTokens = body["max_tokens"]
  if (typeof maxTokens !== "number" || !Number.isInteger(maxTokens) || maxTokens < 1) {
    return "max_tokens: Field required (a positive integer)"
  }
  const messages = body["messages"]
  if (!Array.isArray(messages)) return "messages: Field required"
  if (messages.length === 0) return "messages: at least one message is required"
  for (const [index, message] of messages.entries()) {
    if (!isRecord(message)) return `messages.${index}: Input should be an object`
    const role = message["role"]
    if (role !== "user" && role !== "assistant" && role !== "system") {
      return `messages.${index}.role: Input should be 'user', 'assistant' or 'system'`
    }
    const content = message["content"]
    if (typeof content !== "string" && !Array.isArray(content)) {
      return `messages.${index}.content: Input should be a valid string or list`
    }
    if (typeof content === "string" && content === "" && index < messages.length - 1) {
      return `messages.${index}: all messages must have non-empty content except for the optional final assistant message`
    }
    for (const [blockIndex, block] of contentBlocks(content).entries()) {
      if (block["type"] === "text" && (typeof block["text"] !== "string" || block["text"] === "")) {
        return `messages.${index}.content.${blockIndex}.text: text content blocks must be non-empty`
      }
    }
  }
  // tool_use blocks need their tool_result in the very next message, and a tool_result needs its
  // tool_use in the message right before it.
  for (const [index, message] of messages.entries()) {
    const blocks = contentBlocks((message as Record<string, unknown>)["content"])
    const next = messages[index + 1] as Record<string, unknown> | undefined
    const previous = messages[index - 1] as Record<string, unknown> | undefined
    const toolUseIds = blocks.filter((block) => block["type"] === "tool_use").map((block) => String(block["id"]))
    if (toolUseIds.length > 0 && next !== undefined) {
      const answered = new Set(
        contentBlocks(next["content"])
          .filter((block) => block["type"] === "tool_result")
          .map((block) => String(block["tool_use_id"]))
      )
      const missing = toolUseIds.filter((id) => !answered.has(id))
      if (missing.length > 0) {
        return `messages.${index + 1}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${
          missing.join(", ")
        }. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`
      }
    }
    const known = new Set(
      contentBlocks(previous?.["content"])
        .filter((block) => block["type"] === "tool_use")
        .map((block) => String(block["id"]))
    )
    for (const [blockIndex, block] of blocks.entries()) {
      if (block["type"] !== "tool_result") continue
      const id = String(block["tool_use_id"])
      if (previous?.["role"] !== "assistant" || !known.has(id)) {
        return `messages.${index}.content.${blockIndex}: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${id}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`
      }
    }
  }
  const tools = body["tools"]
  if (tools !== undefined) {
    if (!Array.isArray(tools)) return "tools: Input should be a valid list"
    for (const [index, tool] of tools.entries()) {
      if (!isRecord(tool) || typeof tool["name"] !== "string") return `tools.${index}.name: Field required`
      if (tool["type"] === undefined && !isRecord(tool["input_schema"])) {
        return `tools.${index}.input_schema: Field required`
      }
    }
  }
  return undefined
}

/** Splits into about `pieces` chunks on code point boundaries (nothing for the empty string). */
const split = (text: string, pieces = 3): Array<string> => {
  const chars = Array.from(text)
  if (chars.length === 0) return []
  const size = Math.max(1, Math.ceil(chars.length / pieces))
  const chunks: Array<string> = []
  for (let start = 0; start < chars.length; start += size) chunks.push(chars.slice(start, start + size).join(""))
  return chunks
}

/** About four characters a token, as a stand-in for real counts. */
const approximateTokens = (characters: number) => Math.max(1, Math.ceil(characters / 4))

interface ResolvedBlock {
  readonly type: "text" | "tool_use"
  /** The whole block as a non-streamed Message carries it. */
  readonly full: Record<string, unknown>
  /** The block as content_block_start carries it. */
  readonly start: Record<string, unknown>
  readonly deltas: ReadonlyArray<Record<string, unknown>>
  readonly size: number
}

const resolveBlock = (block: ScriptedBlock): ResolvedBlock => {
  if (block.type === "text") {
    return {
      type: "text",
      full: { type: "text", text: block.text, citations: null },
      start: { type: "text", text: "", citations: null },
      deltas: split(block.text, block.pieces).map((text) => ({ type: "text_delta", text })),
      size: block.text.length
    }
  }
  const id = block.id ?? randomId("toolu_")
  const input = block.input === undefined ? {} : block.input
  const json = JSON.stringify(input)
  const common = { type: "tool_use", id, name: block.name, caller: { type: "direct" } }
  return {
    type: "tool_use",
    full: { ...common, input },
    start: { ...common, input: {} },
    deltas: split(json).map((partial_json) => ({ type: "input_json_delta", partial_json })),
    size: json.length + block.name.length
  }
}

const usage = (inputTokens: number, outputTokens: number) => ({
  input_tokens: inputTokens,
  output_tokens: outputTokens,
  cache_creation_input_tokens: 0,
  cache_read_input_tokens: 0,
  cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
  inference_geo: null,
  output_tokens_details: null,
  server_tool_use: null,
  service_tier: "standard",
  speed: null
})

const messageShell = (model: string, inputTokens: number) => ({
  id: randomId("msg_"),
  type: "message",
  role: "assistant",
  model,
  content: [] as Array<unknown>,
  stop_reason: null as string | null,
  stop_sequence: null,
  stop_details: null,
  container: null,
  diagnostics: null,
  usage: usage(inputTokens, 1)
})

/** Writes SSE frames one by one, yielding between them so the client sees separate chunks; stops once the client left. */
const sseWriter = (response: ServerResponse) => {
  const gone = () => response.destroyed || response.writableEnded
  return {
    gone,
    frame: async (event: string, data: unknown) => {
      if (gone()) return
      response.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)
      await new Promise<void>((resolve) => setImmediate(resolve))
    }
  }
}

const startStream = (response: ServerResponse, requestId: string) => {
  response.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    "request-id": requestId
  })
  response.flushHeaders()
  return sseWriter(response)
}

export const startFakeAnthropic = async (): Promise<FakeAnthropic> => {
  const requests: Array<RecordedRequest> = []
  const queue: Array<ScriptedTurn> = []
  let decide: ((request: RecordedRequest) => ScriptedTurn | undefined) | undefined
  let open = 0
  let aborted = 0

  const reply = async (
    response: ServerResponse,
    requestId: string,
    turn: Extract<ScriptedTurn, { kind: "reply" }>,
    body: RecordedRequest["body"],
    stream: boolean,
    inputTokens: number
  ) => {
    const blocks = turn.blocks.map(resolveBlock)
    const stopReason = turn.stopReason ?? (blocks.some((block) => block.type === "tool_use") ? "tool_use" : "end_turn")
    const outputTokens = approximateTokens(blocks.reduce((sum, block) => sum + block.size, 0))
    const message = messageShell(body.model, inputTokens)
    if (!stream) {
      return sendJson(response, 200, requestId, {
        ...message,
        content: blocks.map((block) => block.full),
        stop_reason: stopReason,
        usage: usage(inputTokens, outputTokens)
      })
    }
    const sse = startStream(response, requestId)
    await sse.frame("message_start", { type: "message_start", message })
    await sse.frame("ping", { type: "ping" })
    for (const [index, block] of blocks.entries()) {
      await sse.frame("content_block_start", { type: "content_block_start", index, content_block: block.start })
      for (const delta of block.deltas) {
        await sse.frame("content_block_delta", { type: "content_block_delta", index, delta })
      }
      await sse.frame("content_block_stop", { type: "content_block_stop", index })
    }
    await sse.frame("message_delta", {
      type: "message_delta",
      delta: { stop_reason: stopReason, stop_sequence: null, stop_details: null, container: null },
      usage: {
        input_tokens: inputTokens,
        output_tokens: outputTokens,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 0,
        output_tokens_details: null,
        server_tool_use: null
      }
    })
    await sse.frame("message_stop", { type: "message_stop" })
    if (!sse.gone()) response.end()
  }

  const streamError = async (
    response: ServerResponse,
    requestId: string,
    turn: Extract<ScriptedTurn, { kind: "stream_error" }>,
    body: RecordedRequest["body"],
    stream: boolean,
    inputTokens: number
  ) => {
    const type = turn.errorType ?? "overloaded_error"
    if (!stream) return sendError(response, statusForErrorType(type), requestId, type, turn.message)
    const sse = startStream(response, requestId)
    await sse.frame("message_start", { type: "message_start", message: messageShell(body.model, inputTokens) })
    await sse.frame("ping", { type: "ping" })
    const text = turn.afterText ?? ""
    if (text !== "") {
      await sse.frame("content_block_start", {
        type: "content_block_start",
        index: 0,
        content_block: { type: "text", text: "", citations: null }
      })
      for (const piece of split(text)) {
        await sse.frame("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: piece } })
      }
    }
    await sse.frame("error", errorBody(type, turn.message, requestId))
    if (!sse.gone()) response.end()
  }

  const hangAfter = async (response: ServerResponse, requestId: string, text: string, body: RecordedRequest["body"], inputTokens: number) => {
    const sse = startStream(response, requestId)
    await sse.frame("message_start", { type: "message_start", message: messageShell(body.model, inputTokens) })
    await sse.frame("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "", citations: null } })
    for (const piece of split(text)) {
      await sse.frame("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: piece } })
    }
  }

  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const requestId = randomId("req_")
    open++
    response.on("close", () => {
      open--
      if (!response.writableEnded) aborted++
    })
    const path = new URL(request.url ?? "/", "http://fake").pathname
    if (path !== "/v1/messages") {
      await readBody(request)
      return sendError(response, 404, requestId, "not_found_error", "Not Found")
    }
    if (request.method !== "POST") {
      await readBody(request)
      return sendError(response, 405, requestId, "invalid_request_error", `Method Not Allowed`)
    }
    const raw = await readBody(request)
    let parsed: unknown
    try {
      parsed = JSON.parse(raw.toString("utf8"))
    } catch {
      return sendError(response, 400, requestId, "invalid_request_error", "There was an issue with the request body: invalid JSON")
    }
    if (!isRecord(parsed)) {
      return sendError(response, 400, requestId, "invalid_request_error", "The request body is not a JSON object")
    }
    const headers = flatHeaders(request)
    const recorded: RecordedRequest = { headers, body: parsed as RecordedRequest["body"] }
    requests.push(recorded)

    // The SDK 1.x sends `apiKey` as `Authorization: Bearer <key>`; `x-api-key` is the older header.
    const bearer = /^Bearer\s+\S+/i.test(headers["authorization"] ?? "")
    if (!headers["x-api-key"] && !bearer) {
      return sendError(response, 401, requestId, "authentication_error", "invalid x-api-key")
    }
    if (!headers["anthropic-version"]) {
      return sendError(response, 400, requestId, "invalid_request_error", "anthropic-version: header is required")
    }
    const invalid = invalidRequest(parsed)
    if (invalid !== undefined) return sendError(response, 400, requestId, "invalid_request_error", invalid)

    let turn: ScriptedTurn | undefined
    try {
      turn = decide?.(recorded)
    } catch (error) {
      return sendError(response, 500, requestId, "api_error", `FakeAnthropic respondWith threw: ${String(error)}`)
    }
    turn ??= queue.shift() ?? { kind: "reply", blocks: [{ type: "text", text: "ok" }] }

    const body = recorded.body
    const stream = body.stream === true
    const inputTokens = approximateTokens(
      JSON.stringify({ system: body.system, messages: body.messages, tools: body.tools }).length
    )
    switch (turn.kind) {
      case "reply":
        return reply(response, requestId, turn, body, stream, inputTokens)
      case "http_error": {
        const type = turn.errorType ?? errorTypeForStatus(turn.status)
        return sendError(response, turn.status, requestId, type, turn.message)
      }
      case "stream_error":
        return streamError(response, requestId, turn, body, stream, inputTokens)
      case "hang":
        if (stream && turn.afterText !== undefined) return hangAfter(response, requestId, turn.afterText, body, inputTokens)
        return
    }
  }

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      if (response.headersSent) return response.destroy()
      sendError(response, 500, randomId("req_"), "api_error", `FakeAnthropic crashed: ${String(error)}`)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    script: (...turns) => {
      queue.push(...turns)
    },
    respondWith: (decider) => {
      decide = decider
    },
    open: () => open,
    aborted: () => aborted,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()))
        server.closeAllConnections()
      })
  }
}
