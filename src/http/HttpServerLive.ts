/**
 * How both services are served: body limit, one log line per request, request ids, JSON bodies
 * on every error response, a JSON 404, CORS, and a one-line error when the port is taken.
 */
import { NodeHttpServer } from "@effect/platform-node"
import { ByteSize, Context, Effect, Layer, Schema } from "effect"
import { HttpRouter, HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import { randomUUID } from "node:crypto"
import { STATUS_CODES } from "node:http"
import type { Duplex } from "node:stream"
import { REQUEST_ID_ANNOTATION } from "../services/RequestContext.ts"
import { Cors, type CorsPolicy, isPreflight, NO_CORS } from "./Cors.ts"
import { statusMessage, withErrorBody } from "./Errors.ts"
import { RequestLog, type RequestLogger } from "./RequestLog.ts"
import { StreamingServer, TakenConnections } from "./TakenConnections.ts"

export const MAX_BODY_SIZE = ByteSize.mebibytes(1)
/**
 * Bounds on receiving a request (not on answering it: event streams stay open): a client that
 * trickles its headers or body (slow loris) is cut off, and headers are at most 16 KiB. Node
 * checks the two timeouts only every `connectionsCheckingInterval` (30 s by default), which
 * would let a trickle live 40 s instead of 10.
 */
const SERVER_LIMITS = {
  headersTimeout: 10_000,
  requestTimeout: 30_000,
  connectionsCheckingInterval: 1_000,
  maxHeaderSize: 16 * 1024
} as const
/**
 * How long requests still running when the server closes may take before they are answered 503
 * (a longer wait was once for open event streams, which now close at once: TakenConnections).
 */
const GRACEFUL_SHUTDOWN_TIMEOUT = "3 seconds"

export class ListenError extends Schema.TaggedError<ListenError>()("ListenError", { message: Schema.String }) {}

/** What a request id may be (a caller's is used only if it is; a UUID is). */
export const SaneRequestId = /^[A-Za-z0-9._-]{1,64}$/
const REQUEST_ID = "x-request-id"

/**
 * Around every route, outermost: every failure becomes its response, no error response leaves
 * without a body, every response and log line of the request carries its `x-request-id` (the
 * caller's when sane, else a fresh UUID), and one line is logged with the final status (RequestLog). A
 * browser's preflight is answered here, for every path and before any route (so before the tenant
 * is chosen: browsers send no custom header on it), and every response to a page of an allowed
 * origin, errors included, carries the CORS headers.
 *
 * Every request passes here, so it is lean: no Effect.gen, no service provided per request, and it
 * is a router middleware rather than the server's, since a server middleware costs each request a
 * span that nothing reads (docs/performance-notes.md). A request without `Origin` costs one lookup more.
 */
const responses = (cors: CorsPolicy, requestLog: RequestLogger) => HttpRouter.middleware((app) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const started = performance.now()
    const given = request.headers[REQUEST_ID]
    const id = given !== undefined && SaneRequestId.test(given) ? given : randomUUID()
    const origin = request.headers.origin
    const preflight = origin !== undefined && isPreflight(request.method, request.headers)
    const finish = (response: HttpServerResponse.HttpServerResponse) => {
      // The router cannot match a path it cannot decode; that is the caller's mistake, not a 404.
      const body = response.status === 404 && !isDecodable(request.url)
        ? HttpServerResponse.jsonUnsafe({ error: "malformed URL" }, { status: 400 })
        : withErrorBody(response)
      const answer = HttpServerResponse.setHeader(
        origin === undefined || preflight ? body : HttpServerResponse.setHeaders(body, cors.headers(origin)),
        REQUEST_ID,
        id
      )
      // The path only: a query string may carry a token (GET /events?token=...).
      const path = request.url.split("?")[0] ?? "/"
      const duration = `${(performance.now() - started).toFixed(1)}ms`
      return Effect.as(requestLog.log(request.method, path, answer.status, duration, id), answer)
    }
    const handled = preflight ? Effect.succeed(HttpServerResponse.empty({ status: 204, headers: cors.preflight(origin) })) : app
    return Effect.matchCauseEffect(Effect.annotateLogs(handled, REQUEST_ID_ANNOTATION, id), {
      onSuccess: finish,
      onFailure: (cause) =>
        Effect.flatMap(HttpServerError.causeResponse(cause), ([response, remaining]) =>
          Effect.andThen(
            response.status >= 500 && response.status !== 503
              ? Effect.annotateLogs(Effect.logError("request failed", remaining), "requestId", id)
              : Effect.void,
            finish(response)
          ))
    })
    // The router's type insists that middleware pass errors on; this one answers them all instead.
  }) as Effect.Effect<HttpServerResponse.HttpServerResponse> as typeof app, { global: true })

/** A path the router could not even decode is the caller's mistake (400); anything else is 404. */
const isDecodable = (url: string) => {
  try {
    decodeURIComponent(url.split("?")[0] ?? "")
    return true
  } catch {
    return false
  }
}

const notFound = Effect.succeed(HttpServerResponse.jsonUnsafe({ error: "not found" }, { status: 404 }))

/** What answers a request no route matches (the main service's console, ConsoleRoutes.ts); it answers 404 for what it does not serve. */
export type Fallback = (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<HttpServerResponse.HttpServerResponse>

export interface ListenOptions {
  readonly host: string
  readonly port: number
  /** Named in errors and the start-up line: `main` or `chat`. */
  readonly name: string
}

/**
 * Serves `routes` on `host:port` until the scope closes; exposes the server (its bound address).
 * `cors` says which pages of other origins may call it (none by default); `fallback` answers what
 * no route matches (by default a JSON 404).
 */
export const serveHttp = <E, R>(routes: Layer.Layer<never, E, R>, options: ListenOptions, cors: CorsPolicy = NO_CORS, fallback?: Fallback) =>
  HttpRouter.serve(Layer.mergeAll(routes, HttpRouter.add("*", "*", fallback ?? notFound), Layer.unwrap(Effect.map(Effect.service(RequestLog), (log) => responses(cors, log)))), {
    disableLogger: true,
    disableListenLog: true
  }).pipe(
    Layer.provide(Layer.succeed(HttpServerRequest.MaxBodySize, MAX_BODY_SIZE)),
    Layer.provide(Layer.succeed(Cors, cors)),
    Layer.provideMerge(listen(options))
  )

/**
 * Requests Node refuses before Plinth sees them (headers too large, a request too slow, bytes
 * that are not HTTP) are answered in the plain `{ error }` shape too, then the connection closes.
 */
const createLimitedServer = () => {
  const server = new StreamingServer(SERVER_LIMITS)
  server.on("clientError", (error: Error & { code?: string }, socket: Duplex) => {
    if (!socket.writable) return socket.destroy()
    const status = error.code === "HPE_HEADER_OVERFLOW" ? 431 : error.code === "ERR_HTTP_REQUEST_TIMEOUT" ? 408 : 400
    const body = JSON.stringify({ error: statusMessage(status) })
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
    )
  })
  return server
}

/**
 * Node's HTTP server, with a listen failure turned into one line that names the setting to change,
 * and the connections it hands over to streams (TakenConnections).
 */
const listen = (options: ListenOptions) =>
  Layer.effectContext(Effect.suspend(() => {
    const server = createLimitedServer()
    return Layer.build(NodeHttpServer.layer(() => server, {
      host: options.host,
      port: options.port,
      gracefulShutdownTimeout: GRACEFUL_SHUTDOWN_TIMEOUT
    })).pipe(
      Effect.map(Context.add(TakenConnections, TakenConnections.forServer(server))),
      Effect.mapError((error) => new ListenError({ message: listenFailure(error.cause, options) }))
    )
  }))

const listenFailure = (cause: unknown, options: ListenOptions): string => {
  const code = (cause as { code?: string } | undefined)?.code
  const variable = options.name === "chat" ? "CHAT_PORT" : "PORT"
  if (code === "EADDRINUSE") return `${options.name} service: port ${options.port} is already in use (set ${variable})`
  if (code === "EACCES") return `${options.name} service: no permission to listen on port ${options.port} (set ${variable})`
  if (code === "EADDRNOTAVAIL") return `${options.name} service: cannot listen on ${options.host} (set HOST)`
  return `${options.name} service: cannot listen on ${options.host}:${options.port}: ${code ?? String(cause)}`
}
