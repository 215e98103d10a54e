/**
 * The floor of the `events` bench, in a process of its own: a bare `node:http` server holding
 * event streams and writing each page change to every one of them, with no authentication,
 * framework or fan-out logic. (HTTP/1.1 clients only: each write is one chunk.) Commands on stdin, one per line, each answered on stdout:
 * `rss` → `rss <bytes>` (after a full GC, settled); `change <slug>` → `sent` once written to all.
 * Prints `port <n>` first. Usage: node --expose-gc bench/sse-bare-server.ts
 */
import { createServer, type ServerResponse } from "node:http"
import * as readline from "node:readline"

const streams = new Set<ServerResponse>()
const server = createServer((_request, response) => {
  response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
  response.write(": connected\n\n")
  streams.add(response)
  response.on("close", () => streams.delete(response))
})
server.listen(0, "127.0.0.1", () => {
  const address = server.address()
  process.stdout.write(`port ${typeof address === "object" && address !== null ? address.port : 0}\n`)
})

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const [command, argument] = line.split(" ")
  if (command === "rss") {
    setTimeout(() => {
      globalThis.gc?.()
      process.stdout.write(`rss ${process.memoryUsage().rss}\n`)
    }, 1_000)
  } else if (command === "change") {
    // One chunk, built once, written to each socket as one write: node:http at its cheapest (its
    // own response.write makes three writes per call, corked until the next tick).
    const frame = Buffer.from(`event: page_change\ndata: ${JSON.stringify({ schema: "public", slug: argument })}\n\n`)
    const chunk = Buffer.concat([Buffer.from(`${frame.length.toString(16)}\r\n`), frame, Buffer.from("\r\n")])
    for (const response of streams) response.socket?.write(chunk)
    process.stdout.write("sent\n")
  }
})
