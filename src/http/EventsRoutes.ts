/**
 * GET /events (spec §6.1): page changes as Server-Sent Events. The JWT comes in the
 * Authorization header or, because browsers' EventSource cannot set headers, as `?token=`.
 * The stream opens with `: connected`, sends `: heartbeat` every EVENTS_HEARTBEAT (30 s), and
 * `event: page_change` / `event: resync` as the tenant's actor publishes them.
 */
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Effect } from "effect"
import { ServerResponse } from "node:http"
import { Readable } from "node:stream"
import { Sse } from "effect/encoding"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { type PageEvent, type Subscriber, TenantActor } from "../actors/TenantActor.ts"
import { AccessTokens } from "../services/AccessTokens.ts"
import { authenticate, bearerCredential } from "./Authentication.ts"
import { TooManyRequests } from "./Errors.ts"

const encoder = new TextEncoder()
const encodeText = (text: string) => encoder.encode(text)

/** An event's bytes, as is and as one HTTP/1.1 chunk (`<length in hex>\r\n<bytes>\r\n`). */
interface Frame {
  readonly bytes: Uint8Array
  readonly chunk: Uint8Array
}

const CRLF = encodeText("\r\n")
/** `parts` as one HTTP/1.1 chunk. */
const chunkOf = (parts: ReadonlyArray<Uint8Array>, length: number): Uint8Array =>
  Buffer.concat([encodeText(`${length.toString(16)}\r\n`), ...parts, CRLF])
const makeFrame = (text: string): Frame => {
  const bytes = encodeText(text)
  return { bytes, chunk: chunkOf([bytes], bytes.length) }
}

const CONNECTED = encodeText(": connected\n\n")
/** What a stream may hold unsent before it is let go: about 256 page changes. */
const MAX_BUFFERED_BYTES = 32 * 1024
const HEARTBEAT = makeFrame(": heartbeat\n\n")

/**
 * One event goes to every stream of the tenant as the same object: its frame is built once and
 * shared (with thousands of streams, encoding per stream is most of the work of a page change).
 */
const frames = new WeakMap<PageEvent, Frame>()
const frame = (event: PageEvent): Frame => {
  if (event._tag === "Heartbeat") return HEARTBEAT
  const known = frames.get(event)
  if (known !== undefined) return known
  const made = makeFrame(
    event._tag === "PageChange"
      ? Sse.encoder.write({ _tag: "Event", event: "page_change", id: undefined, data: JSON.stringify({ schema: event.schema, slug: event.slug }) })
      : Sse.encoder.write({ _tag: "Event", event: "resync", id: undefined, data: "{}" })
  )
  frames.set(event, made)
  return made
}

/** The connection a stream's frames can be written to directly, once the platform has sent the head. */
export interface DirectResponse {
  /**
   * The head is written and the connection is this response's: what is written now follows it.
   * (Node sends the head with the body's first bytes, `: connected`, which the body holds first.)
   */
  readonly headersSent: boolean
  readonly destroyed: boolean
  readonly writableLength: number
  /** The body is sent in HTTP/1.1 chunks, so each write must be one. */
  readonly chunked: boolean
  /** Writes bytes as they go on the wire. */
  readonly write: (wire: Uint8Array) => boolean
}

/**
 * Writes go to the socket itself, each already one chunk: the response's own `write` makes three
 * writes per call (length, bytes, CRLF), corked until the next tick. Measured with 10,000 streams:
 * 110–165 ms until a change was on its way to all of them that way, 70–100 ms this way.
 */
const directResponse = (response: ServerResponse): DirectResponse => ({
  // Until the response has the socket (a pipelined request behind another), its bytes wait inside it.
  get headersSent() {
    return response.headersSent && response.socket !== null
  },
  get destroyed() {
    return response.destroyed
  },
  get writableLength() {
    return response.writableLength
  },
  get chunked() {
    return response.chunkedEncoding
  },
  write: (wire) => response.socket?.write(wire) ?? false
})

/**
 * A stream's body, which the tenant's actor writes each event's bytes into: no fiber or queue per
 * stream (with ten thousand streams they were most of the memory and of a change's latency).
 * Node pipes the body to the socket. Once the head is sent and everything pushed before has gone
 * out, frames go through `response` straight to the connection, skipping the body's flow (a tick
 * and an event per stream and frame), held until the actor's `flush`, so that a burst of events
 * goes out in one write (measured: a burst of 20 changes to 10,000 streams took 2.6 s written one
 * by one). Until then, and without a response, they are pushed in order. A stream that holds
 * MAX_BUFFERED_BYTES unsent is let go (it ends; the client reconnects and refetches).
 */
export const eventStreamBody = (response?: DirectResponse): { readonly body: Readable; readonly subscriber: Subscriber } => {
  const body = new Readable({ read() {} })
  // First in the body, so nothing written straight to the connection can come before the head.
  body.push(CONNECTED)
  // What waits for the actor's flush: one frame, or with a burst more (kept apart so that the
  // usual single frame allocates nothing per stream).
  let first: Frame | undefined
  const more: Array<Frame> = []
  let heldBytes = 0
  const wire = (held: Frame, chunked: boolean): Uint8Array => {
    if (more.length === 0) return chunked ? held.chunk : held.bytes
    const parts = [held.bytes, ...more.map((next) => next.bytes)]
    return chunked ? chunkOf(parts, heldBytes) : Buffer.concat(parts, heldBytes)
  }
  const flush = () => {
    if (first === undefined) return
    if (response !== undefined && !response.destroyed) response.write(wire(first, response.chunked))
    first = undefined
    more.length = 0
    heldBytes = 0
  }
  return {
    body,
    subscriber: {
      offer: (event) => {
        if (response !== undefined && response.headersSent && body.readableLength === 0) {
          const next = frame(event)
          if (response.destroyed || response.writableLength + heldBytes + next.bytes.length > MAX_BUFFERED_BYTES) return false
          if (first === undefined) first = next
          else more.push(next)
          heldBytes += next.bytes.length
          return true
        }
        if (body.readableLength > MAX_BUFFERED_BYTES) return false
        body.push(frame(event).bytes)
        return true
      },
      flush,
      end: () => {
        flush()
        body.push(null)
      }
    }
  }
}

/** The header's token, else `?token=` (EventSource cannot set headers). */
const bearerToken = (request: HttpServerRequest.HttpServerRequest): string =>
  bearerCredential(request.headers.authorization) || (new URL(request.url, "http://localhost").searchParams.get("token") ?? "")

export const EventsRoute = HttpRouter.add("GET", "/events", Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const tokens = yield* AccessTokens
  const tenant = yield* TenantActor
  const principal = yield* authenticate(tokens, bearerToken(request))
  const response = NodeHttpServerRequest.toServerResponse(request)
  const { body, subscriber } = eventStreamBody(response instanceof ServerResponse ? directResponse(response) : undefined)
  // Attach before answering: a client that has seen `: connected` misses nothing after it.
  yield* tenant.attach(principal.userId, subscriber).pipe(
    Effect.mapError((error) => new TooManyRequests({ error: `at most ${error.limit} event streams per user`, retryAfterSeconds: 30 }))
  )
  return HttpServerResponse.raw(body, {
    contentType: "text/event-stream",
    headers: { "cache-control": "no-cache", "x-accel-buffering": "no" }
  })
}))
