/**
 * The floor of the `events` bench, in a process of its own: a bare `node:http` server holding
 * event streams and writing each page change to every one of them, with no authentication,
 * framework or fan-out logic. Like Plinth, it takes each stream's connection from node:http
 * (src/http/TakenConnections.ts) and writes to the socket. Commands on stdin, one per line, each
 * answered on stdout: `memory` → `memory <rss bytes> <heap used bytes>` (after a full GC, settled); `change <slug>` → `sent`
 * once written to all. Prints `port <n>` first. Usage: node --expose-gc bench/sse-bare-server.ts
 */
import type { Socket } from "node:net"
import * as readline from "node:readline"
import { StreamingServer, takeConnection } from "../src/http/TakenConnections.ts"

const streams = new Set<Socket>()
const server = new StreamingServer({})
server.on("request", (request, response) => {
  takeConnection(server, request, response, (socket) => {
    socket.write("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n: connected\n\n")
    streams.add(socket)
    socket.on("close", () => streams.delete(socket))
  })
})
server.listen(0, "127.0.0.1", () => {
  const address = server.address()
  process.stdout.write(`port ${typeof address === "object" && address !== null ? address.port : 0}\n`)
})

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const [command, argument] = line.split(" ")
  if (command === "memory") {
    setTimeout(() => {
      globalThis.gc?.()
      const { rss, heapUsed } = process.memoryUsage()
      process.stdout.write(`memory ${rss} ${heapUsed}\n`)
    }, 1_000)
  } else if (command === "change") {
    // Built once, written to each socket as one write: node:http at its cheapest.
    const frame = Buffer.from(`event: page_change\ndata: ${JSON.stringify({ schema: "public", slug: argument })}\n\n`)
    for (const socket of streams) socket.write(frame)
    process.stdout.write("sent\n")
  }
})
