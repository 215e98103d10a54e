/**
 * A connection taken from node:http (TakenConnections): node:http lets go of it entirely (its
 * parser, its listeners, the response), the client gets exactly what is written to it, and it
 * closes when its client closes or talks again, and when the server closes. It is not taken when
 * the server is closing or another request follows on it.
 */
import type { IncomingMessage, ServerResponse } from "node:http"
import * as net from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import { StreamingServer, takeConnection } from "../../src/http/TakenConnections.ts"
import { eventually } from "../support/eventually.ts"
import { rawClient } from "../support/rawClient.ts"

interface Taken {
  readonly socket: net.Socket
  readonly response: ServerResponse
}

let server: StreamingServer | undefined
afterEach(() => new Promise<void>((resolve) => (server === undefined ? resolve() : server.close(() => resolve()))))

/**
 * A server that takes the connection of every request to /take and writes `taken` to it (others
 * get `other`), and a raw client of it that sends `requests` in one write.
 */
const connect = async (requests = "GET /take HTTP/1.1\r\nhost: localhost\r\n\r\n") => {
  const taken: Array<Taken> = []
  const outcomes: Array<boolean> = []
  const streaming = new StreamingServer({})
  server = streaming
  streaming.on("request", (request: IncomingMessage, response: ServerResponse) => {
    if (request.url !== "/take") return response.end("other")
    takeConnection(streaming, request, response, (socket) => {
      taken.push({ socket, response })
      socket.write("taken\n")
    }, (outcome) => outcomes.push(outcome))
  })
  await new Promise<void>((resolve) => streaming.listen(0, "127.0.0.1", resolve))
  const { port } = streaming.address() as net.AddressInfo
  const { socket: client, received, closed } = rawClient(port, requests)
  expect(await eventually(async () => outcomes.length === 1, 3_000)).toBe(true)
  return { client, taken, outcomes, received, closed, server: streaming }
}

describe("a connection taken from node:http", () => {
  it("keeps nothing of node:http: no parser, none of its listeners, the response ended without it", async () => {
    const { taken: [taken], outcomes, received } = await connect()
    expect(outcomes).toEqual([true])
    expect((taken!.socket as net.Socket & { parser?: unknown }).parser).toBeNull()
    expect(taken!.response.socket).toBeNull()
    expect(taken!.response.writableEnded).toBe(true)
    // Only the taking's own: closing when the client talks or ends, ignoring errors, forgetting it.
    for (const event of ["data", "end", "error", "close"]) expect(taken!.socket.listenerCount(event)).toBe(1)
    for (const event of ["drain", "timeout", "pause", "resume"]) expect(taken!.socket.listenerCount(event)).toBe(0)
    // The client gets what is written, and nothing from node:http (no head of the ended response).
    expect(await eventually(async () => received() === "taken\n", 3_000)).toBe(true)
    taken!.socket.write("more\n")
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

  it("is not taken when another request follows in the same packet: the connection closes, the server goes on", async () => {
    const { closed, outcomes, taken, received, server } = await connect(
      "GET /take HTTP/1.1\r\nhost: localhost\r\n\r\nGET /other HTTP/1.1\r\nhost: localhost\r\n\r\n"
    )
    await closed
    expect(outcomes).toEqual([false])
    expect(taken).toEqual([])
    expect(received()).toBe("")
    expect(server.taken.size).toBe(0)
    // Still serving.
    expect(await (await fetch(`http://127.0.0.1:${(server.address() as net.AddressInfo).port}/other`)).text()).toBe("other")
  })

  it("is closed by the server's close, which then completes", async () => {
    const { closed, server: closing } = await connect()
    server = undefined
    await new Promise<void>((resolve, reject) => closing.close((error) => (error === undefined ? resolve() : reject(error))))
    await closed
    expect(await eventually(async () => closing.taken.size === 0, 3_000)).toBe(true)
  })

  it("is not taken once the server is closing: the connection closes, and the close completes", async () => {
    const closing = new StreamingServer({})
    const outcomes: Array<boolean> = []
    closing.on("request", (request: IncomingMessage, response: ServerResponse) => {
      // The server starts closing while this request is in the app.
      closing.close()
      takeConnection(closing, request, response, () => undefined, (outcome) => outcomes.push(outcome))
    })
    const stopped = new Promise<void>((resolve) => closing.on("close", () => resolve()))
    await new Promise<void>((resolve) => closing.listen(0, "127.0.0.1", resolve))
    await rawClient((closing.address() as net.AddressInfo).port, "GET /take HTTP/1.1\r\nhost: localhost\r\n\r\n").closed
    await stopped
    expect(outcomes).toEqual([false])
  })
})
