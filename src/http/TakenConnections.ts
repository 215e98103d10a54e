/**
 * Connections that node:http hands over to a stream which holds them until they close (GET /events).
 *
 * While a response is open, node:http keeps its request, its response and the connection's parser
 * (a native object with its buffers): most of an idle event stream's memory
 * (docs/performance-notes.md). An event stream's response is its head and then bytes until the
 * connection closes, so once Plinth has decided to stream, it takes the connection the way
 * node:http does for an upgrade: the parser is freed, node:http's listeners are removed, and the
 * response is ended without the connection, so that the platform writes nothing more. What is left is the socket, written to directly.
 *
 * node:http no longer knows these connections, but `server.close` still waits for every
 * connection to end: the server closes them itself (`StreamingServer`).
 */
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Context, Effect } from "effect"
import type { HttpServerRequest } from "effect/http"
import { type IncomingMessage, Server, ServerResponse } from "node:http"
import { createRequire } from "node:module"
import type { Socket } from "node:net"

/**
 * node:http's own way of letting a connection's parser go (`_http_common`, as for an upgrade). It
 * is not public: were it gone, a taken connection would keep its parser (more memory, nothing else).
 */
const { freeParser } = createRequire(import.meta.url)("_http_common") as {
  readonly freeParser?: (parser: unknown, request: IncomingMessage | null, socket: Socket) => void
}

/** What node:http listens to on a connection it serves (`connectionListenerInternal`); net's own `end` listener goes too. */
const SERVER_SOCKET_EVENTS = ["data", "end", "close", "drain", "error", "timeout", "pause", "resume"] as const

/** A node:http server that closes, when it closes, the connections it handed over, and hands over no more. */
export class StreamingServer extends Server {
  readonly taken = new Set<Socket>()
  closing = false
  override close(callback?: (error?: Error) => void): this {
    this.closing = true
    super.close(callback)
    // Streams have no end of their own to wait for: their clients reconnect elsewhere.
    for (const socket of this.taken) socket.destroy()
    return this
  }
}

interface ParsedSocket extends Socket {
  readonly parser?: { readonly incoming?: IncomingMessage | null } | null
}

/** The connection, taken from node:http; none when it cannot be (and then it is closed, if open). */
const take = (server: StreamingServer, request: IncomingMessage, response: ServerResponse): Socket | undefined => {
  const socket = response.socket as ParsedSocket | null
  if (socket === null || socket.destroyed) return undefined
  // Not when the server is closing (it would wait for the stream), and not when a request pipelined
  // behind this one has already reached the app: node:http must stay to end that one, so the
  // connection is closed instead (node:http aborts what it queued on it).
  const incoming = socket.parser?.incoming
  if (server.closing || (incoming !== undefined && incoming !== null && incoming !== request)) {
    socket.destroy()
    return undefined
  }
  freeParser?.(socket.parser, request, socket)
  response.detachSocket(socket)
  for (const event of SERVER_SOCKET_EVENTS) socket.removeAllListeners(event)
  // Ended without a connection, the response writes nothing, and the platform sees it done.
  response.end()
  server.taken.add(socket)
  socket.on("error", () => undefined)
  socket.on("close", () => server.taken.delete(socket))
  // One way: a client that ends its side is gone, one that sends anything more (a request after
  // this one, a body) is not speaking to a stream.
  socket.on("end", () => socket.destroy())
  socket.on("data", () => socket.destroy())
  // node:http may have paused it (backpressure of pipelined requests): reading is how a departed client is noticed.
  socket.resume()
  return socket
}

/**
 * Takes `response`'s connection from node:http and hands it to `use` at once; after that nothing
 * of node:http reads or writes it, and what `use` writes follows the bytes sent before. It happens
 * once node:http is done with the bytes that came with the request (its parser must not be freed
 * in the middle of them), and, for a request pipelined behind another, once the response has the
 * connection (when that one is answered). `done` is called with whether it was taken; it is not
 * when the connection closed first, the server is closing, or another request follows on it.
 * The connection closes when its client ends its side or sends anything more, and when the
 * server closes. Returns a function that gives up waiting.
 */
export const takeConnection = (
  server: StreamingServer,
  request: IncomingMessage,
  response: ServerResponse,
  use: (socket: Socket) => void,
  done: (taken: boolean) => void = () => undefined
): () => void => {
  let immediate: NodeJS.Immediate | undefined
  const later = () => {
    immediate = setImmediate(() => {
      const socket = take(server, request, response)
      if (socket !== undefined) use(socket)
      done(socket !== undefined)
    })
  }
  if (response.socket !== null) later()
  else response.once("socket", later)
  return () => {
    response.off("socket", later)
    if (immediate !== undefined) clearImmediate(immediate)
  }
}

export class TakenConnections extends Context.Service<TakenConnections, {
  /** `takeConnection` for the request: whether its connection was taken (and given to `use`). */
  readonly take: (request: HttpServerRequest.HttpServerRequest, use: (socket: Socket) => void) => Effect.Effect<boolean>
}>()("plinth/TakenConnections") {
  static readonly forServer = (server: StreamingServer) =>
    TakenConnections.of({
      take: (request, use) => {
        const incoming = NodeHttpServerRequest.toIncomingMessage(request)
        const response = NodeHttpServerRequest.toServerResponse(request)
        if (!(response instanceof ServerResponse) || response.destroyed) return Effect.succeed(false)
        return Effect.callback<boolean>((resume) => {
          const giveUp = takeConnection(server, incoming as IncomingMessage, response, use, (taken) => resume(Effect.succeed(taken)))
          return Effect.sync(giveUp)
        })
      }
    })
}
