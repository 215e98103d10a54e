/**
 * Connections that node:http hands over to a stream which holds them until they close (GET /events).
 *
 * While a response is open, node:http keeps its request, its response and the connection's parser
 * (a native object with its buffers): measured, ~15 KB of an idle event stream's ~17 KB on a bare
 * node:http server, and most of the memory of ten thousand streams (docs/benchmarks.md). An event
 * stream's response is its head and then bytes until the connection closes, so once Plinth has
 * decided to stream, it takes the connection the way node:http does for an upgrade: the parser is
 * freed, node:http's listeners are removed, and the response is ended without the connection, so
 * that the platform writes nothing more. What is left is the socket, written to directly.
 *
 * node:http no longer knows these connections, but `server.close` still waits for every
 * connection to end: the server closes them itself (`StreamingServer`).
 */
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Context, Effect } from "effect"
import type { HttpServerRequest } from "effect/http"
import { type IncomingMessage, Server, type ServerOptions, ServerResponse } from "node:http"
import { createRequire } from "node:module"
import type { Socket } from "node:net"

/** node:http's own way of letting a connection's parser go (`_http_common`, as for an upgrade). */
const { freeParser } = createRequire(import.meta.url)("_http_common") as {
  readonly freeParser: (parser: unknown, request: IncomingMessage | null, socket: Socket) => void
}

/** What node:http listens to on a connection it serves (`connectionListenerInternal`). */
const SERVER_SOCKET_EVENTS = ["data", "end", "close", "drain", "error", "timeout", "pause", "resume"] as const

/** A node:http server that ends, when it closes, the connections it handed over. */
export class StreamingServer extends Server {
  readonly taken = new Set<Socket>()
  constructor(options: ServerOptions) {
    super(options)
  }
  override close(callback?: (error?: Error) => void): this {
    super.close(callback)
    // Streams have no end of their own to wait for: their clients reconnect elsewhere.
    for (const socket of this.taken) socket.destroy()
    return this
  }
}

/**
 * Takes `response`'s connection from node:http: after this, nothing of node:http's reads or writes
 * it, and what the caller writes to it follows the bytes sent before. Waits for the connection if
 * the request is pipelined behind another (its response gets the connection once that one ends).
 * The connection is closed when its client closes its side or sends anything more (the stream is
 * one way), and when the server closes.
 */
export const takeConnection = (server: StreamingServer, request: IncomingMessage, response: ServerResponse, socket: Socket): Socket => {
  freeParser((socket as Socket & { readonly parser?: unknown }).parser, request, socket)
  response.detachSocket(socket)
  for (const event of SERVER_SOCKET_EVENTS) socket.removeAllListeners(event)
  // Ended without a connection, the response writes nothing, and the platform sees it done.
  response.end()
  server.taken.add(socket)
  socket.on("error", () => undefined)
  socket.on("close", () => server.taken.delete(socket))
  socket.on("end", () => socket.destroy())
  socket.on("data", () => socket.destroy())
  return socket
}

export class TakenConnections extends Context.Service<TakenConnections, {
  /** The request's connection, taken from node:http (`takeConnection`); none if it closed first or is not HTTP/1. */
  readonly take: (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<Socket | undefined>
}>()("plinth/TakenConnections") {
  static readonly forServer = (server: StreamingServer) =>
    TakenConnections.of({
      take: (request) => {
        const incoming = NodeHttpServerRequest.toIncomingMessage(request)
        const response = NodeHttpServerRequest.toServerResponse(request)
        if (!(response instanceof ServerResponse) || response.destroyed) return Effect.succeed(undefined)
        // A connection already closed is not taken: nothing would ever let it go from `taken`.
        const take = (socket: Socket) => (socket.destroyed ? undefined : takeConnection(server, incoming as IncomingMessage, response, socket))
        if (response.socket !== null) return Effect.succeed(take(response.socket))
        return Effect.callback<Socket | undefined>((resume) => {
          const onSocket = (socket: Socket) => resume(Effect.succeed(take(socket)))
          response.once("socket", onSocket)
          return Effect.sync(() => response.off("socket", onSocket))
        })
      }
    })
}
