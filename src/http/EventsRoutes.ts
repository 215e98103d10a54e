/**
 * GET /events (spec §6.1): page changes as Server-Sent Events. The JWT comes in the
 * Authorization header or, because browsers' EventSource cannot set headers, as `?token=`.
 * The stream opens with `: connected`, sends `: heartbeat` every EVENTS_HEARTBEAT (30 s), and
 * `event: page_change` / `event: resync` as the tenant's actor publishes them.
 */
import { Effect, Exit, References, Scope } from "effect"
import { Sse } from "effect/encoding"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import type { Socket } from "node:net"
import { type PageEvent, type Subscriber, TenantActor } from "../actors/TenantActor.ts"
import { AccessTokens } from "../services/AccessTokens.ts"
import { authenticate, bearerCredential } from "./Authentication.ts"
import { Cors } from "./Cors.ts"
import { TooManyRequests, Unavailable } from "./Errors.ts"
import { SaneRequestId } from "./HttpServerLive.ts"
import type { PageEvent as PageEventFrame } from "./PageEvents.ts"
import { TakenConnections } from "./TakenConnections.ts"
import { holdTenant } from "./TenantSelection.ts"

const encoder = new TextEncoder()

/** What a stream may hold unsent before it is let go: about 256 page changes. */
const MAX_BUFFERED_BYTES = 32 * 1024
const HEARTBEAT = encoder.encode(": heartbeat\n\n")

/**
 * One event goes to every stream of the tenant as the same object: its bytes are encoded once and
 * shared (with thousands of streams, encoding per stream is most of the work of a page change).
 */
const frames = new WeakMap<PageEvent, Uint8Array>()
const frame = (event: PageEvent): Uint8Array => {
  if (event._tag === "Heartbeat") return HEARTBEAT
  const known = frames.get(event)
  if (known !== undefined) return known
  const made = encoder.encode(
    sseFrame(event._tag === "PageChange" ? { event: "page_change", data: { schema: event.schema, slug: event.slug } } : { event: "resync", data: {} })
  )
  frames.set(event, made)
  return made
}

/** Typed by the events' schema (PageEvents.ts), so what is sent is what /openapi.json and the client describe. */
const sseFrame = (event: PageEventFrame): string =>
  Sse.encoder.write({ _tag: "Event", event: event.event, id: undefined, data: JSON.stringify(event.data) })

/**
 * The response's head and its first bytes. The body ends when the connection closes (no length,
 * no chunks: HTTP/1.0 and 1.1 clients read it alike), which is how a stream ends anyway.
 */
const headOf = (requestId: unknown, cors: string) =>
  encoder.encode(
    `HTTP/1.1 200 OK\r\ndate: ${new Date().toUTCString()}\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n` +
      // Written by hand, so checked here too, as the middleware checks a caller's.
      `x-accel-buffering: no\r\n${typeof requestId === "string" && SaneRequestId.test(requestId) ? `x-request-id: ${requestId}\r\n` : ""}` +
      `${cors}connection: close\r\n\r\n: connected\n\n`
  )

/** The connection a stream writes to (a socket; its shape, for tests). */
export interface StreamConnection {
  readonly destroyed: boolean
  /** Bytes written but not yet sent. */
  readonly writableLength: number
  readonly write: (bytes: Uint8Array) => boolean
  readonly destroy: () => void
}

/**
 * One client's stream, as the tenant's actor sees it: no fiber, queue or body per stream (with ten
 * thousand streams, those were most of the memory and of a change's latency). What the actor hands
 * over is held until its `flush` and then written to the connection in one write, so that a burst
 * of events goes out at once rather than one write per event (docs/performance-notes.md). Before
 * the connection is taken from node:http (`start`), events are held too. A stream whose connection
 * holds MAX_BUFFERED_BYTES unsent is let go (it ends; the client reconnects and refetches).
 */
export class EventStream implements Subscriber {
  private connection: StreamConnection | undefined
  private ended = false
  // What waits for the flush: one frame, or with a burst more (kept apart so that the usual
  // single frame allocates nothing per stream).
  private first: Uint8Array | undefined
  private more: Array<Uint8Array> | undefined
  private heldBytes = 0

  offer(event: PageEvent): boolean {
    if (this.ended || this.connection?.destroyed === true) return false
    const next = frame(event)
    if ((this.connection?.writableLength ?? 0) + this.heldBytes + next.length > MAX_BUFFERED_BYTES) return false
    if (this.first === undefined) this.first = next
    else (this.more ??= []).push(next)
    this.heldBytes += next.length
    return true
  }

  flush(): void {
    if (this.connection === undefined || this.first === undefined) return
    if (!this.connection.destroyed) {
      this.connection.write(this.more === undefined ? this.first : Buffer.concat([this.first, ...this.more], this.heldBytes))
    }
    this.first = undefined
    this.more = undefined
    this.heldBytes = 0
  }

  /**
   * Sends what is held and closes the connection: at once, since a stream that is let go has 32 KiB
   * its client does not read, which a graceful end would wait for (what the kernel has is still sent).
   */
  end(): void {
    this.ended = true
    if (this.connection === undefined) return
    this.flush()
    this.connection.destroy()
  }

  /** Writes `head` to `connection`, then what is held, and from then on writes there. */
  start(connection: StreamConnection, head: Uint8Array): void {
    this.connection = connection
    connection.write(head)
    if (this.ended) this.end()
    else this.flush()
  }
}

/** The header's token, else `?token=` (EventSource cannot set headers). */
const bearerToken = (request: HttpServerRequest.HttpServerRequest): string =>
  bearerCredential(request.headers.authorization) || (new URL(request.url, "http://localhost").searchParams.get("token") ?? "")

/**
 * The stream lives as long as its connection, not as its request: its place at the tenant's actor
 * and its hold on the tenant are in a scope of its own, closed when the connection closes. The
 * request ends once the connection is taken, with nothing of it left behind (a request's fiber,
 * scope and node:http objects were most of an idle stream's memory).
 */
export const EventsRoute = HttpRouter.add("GET", "/events", Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const tokens = yield* AccessTokens
  const tenant = yield* TenantActor
  const connections = yield* TakenConnections
  const principal = yield* authenticate(tokens, bearerToken(request))
  // The id the request's log line and every other response carry (HttpServerLive's middleware), and
  // the CORS headers the middleware gives every other response (this one it never sends).
  const head = headOf((yield* References.CurrentLogAnnotations)["requestId"], (yield* Cors).headLines(request.headers.origin))
  const stream = new EventStream()
  const lifetime = yield* Scope.make()
  // Attached before answering: a client that has seen `: connected` misses nothing after it.
  const taken = yield* holdTenant.pipe(
    Effect.andThen(tenant.attach(principal.userId, stream)),
    Effect.mapError((error) => new TooManyRequests({ error: `at most ${error.limit} event streams per user`, retryAfterSeconds: 30 })),
    Effect.andThen(() => connections.take(request, (connection) => open(stream, lifetime, connection, head))),
    Scope.provide(lifetime),
    Effect.onExit((exit) => (Exit.isSuccess(exit) && exit.value ? Effect.void : Scope.close(lifetime, exit)))
  )
  // Taken, the connection is the stream's and this response is not sent: it is the request's
  // outcome for its log line. Not taken, the client is gone or the server is closing.
  return taken ? HttpServerResponse.empty({ status: 200 }) : yield* new Unavailable({ error: "the event stream could not be opened" })
}))

/**
 * Starts `stream` on its connection, and closes `lifetime` when the connection closes. Not inline
 * in the route: a closure there would keep the whole request (its fiber's context, node:http's
 * objects) for as long as the stream.
 */
const open = (stream: EventStream, lifetime: Scope.Closeable, connection: Socket, head: Uint8Array) => {
  connection.once("close", () => Effect.runFork(Scope.close(lifetime, Exit.void)))
  stream.start(connection, head)
}
