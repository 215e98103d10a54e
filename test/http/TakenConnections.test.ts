/**
 * A connection taken from node:http (TakenConnections): node:http lets go of it entirely (its
 * parser, its listeners, the response), the client gets exactly what is written to it, and it
 * closes when its client closes or talks again, and when the server closes.
 */
import type { IncomingMessage, ServerResponse } from "node:http"
import * as net from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import { StreamingServer, takeConnection } from "../../src/http/TakenConnections.ts"
import { eventually } from "../sql/fixtures.ts"

interface Taken {
  readonly socket: net.Socket
  readonly response: ServerResponse
}

let server: StreamingServer | undefined
afterEach(() => new Promise<void>((resolve) => (server === undefined ? resolve() : server.close(() => resolve()))))

/** A server that takes every request's connection and writes `taken` to it, and a raw client of it. */
const connect = async () => {
  const taken: Array<Taken> = []
  server = new StreamingServer({})
  server.on("request", (request: IncomingMessage, response: ServerResponse) => {
    const socket = takeConnection(server!, request, response, response.socket!)
    taken.push({ socket, response })
    socket.write("taken\n")
  })
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as net.AddressInfo
  const client = net.connect(port, "127.0.0.1")
  let received = ""
  client.setEncoding("latin1")
  client.on("data", (chunk: string) => (received += chunk))
  const closed = new Promise<void>((resolve) => client.on("close", () => resolve()))
  client.write("GET / HTTP/1.1\r\nhost: localhost\r\n\r\n")
  expect(await eventually(async () => taken.length === 1, 3_000)).toBe(true)
  return { client, taken: taken[0]!, received: () => received, closed, server }
}

describe("a connection taken from node:http", () => {
  it("keeps nothing of node:http: no parser, none of its listeners, the response ended without it", async () => {
    const { taken, received } = await connect()
    expect((taken.socket as net.Socket & { parser?: unknown }).parser).toBeNull()
    expect(taken.response.socket).toBeNull()
    expect(taken.response.writableEnded).toBe(true)
    // Only the taking's own: closing when the client talks or ends, ignoring errors, forgetting it.
    for (const event of ["data", "end", "error", "close"]) expect(taken.socket.listenerCount(event)).toBe(1)
    for (const event of ["drain", "timeout", "pause", "resume"]) expect(taken.socket.listenerCount(event)).toBe(0)
    // The client gets what is written, and nothing from node:http (no head of the ended response).
    expect(await eventually(async () => received() === "taken\n", 3_000)).toBe(true)
    taken.socket.write("more\n")
    expect(await eventually(async () => received() === "taken\nmore\n", 3_000)).toBe(true)
  })

  it("closes when its client ends its side", async () => {
    const { client, closed, server } = await connect()
    client.end()
    await closed
    expect(await eventually(async () => server.taken.size === 0, 3_000)).toBe(true)
  })

  it("closes when its client sends anything more (a stream is one way)", async () => {
    const { client, closed, server } = await connect()
    client.write("GET /again HTTP/1.1\r\nhost: localhost\r\n\r\n")
    await closed
    expect(await eventually(async () => server.taken.size === 0, 3_000)).toBe(true)
  })

  it("is closed by the server's close, which then completes", async () => {
    const { closed, server: closing } = await connect()
    server = undefined
    await new Promise<void>((resolve, reject) => closing.close((error) => (error === undefined ? resolve() : reject(error))))
    await closed
    expect(await eventually(async () => closing.taken.size === 0, 3_000)).toBe(true)
  })
})
