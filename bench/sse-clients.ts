/**
 * The load side of the `events` bench, in a process of its own: opens event streams in steps
 * (each line `open <n>` on stdin opens n more and is answered `ready <total>` once all are
 * connected), and for each page change reports when its last client (and its median client)
 * received it.
 * Usage: node bench/sse-clients.ts <base-url> <jwt>
 *
 * Each stream is a bare TCP socket speaking HTTP/1.1 that looks for the page change's slug in
 * the bytes as they arrive: with node:http's client (a response stream per request, chunked
 * parsing, a regular expression and JSON.parse per frame) the load side was part of what was
 * measured: the bare node:http floor went from 143 to 102 ms (median, to the last client) with this one.
 */
import * as net from "node:net"
import * as readline from "node:readline"
import { percentile } from "./stats.ts"

const [base, token] = process.argv.slice(2)
const url = new URL(base!)
const request = `GET /events HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${token}\r\naccept: text/event-stream\r\n\r\n`
const SLUG = `"slug":"`
const CONNECTED = ": connected\n\n"
const received = new Map<string, Array<number>>()
let connected = 0
let count = 0
/** The next stream to open: at most OPENING_AT_ONCE are connecting at a time (a storm of 5,000 connects overflows the listen backlog). */
let next = 0
const OPENING_AT_ONCE = 500

const now = () => performance.timeOrigin + performance.now()

const fail = (i: number, message: string) => {
  process.stderr.write(`stream ${i}: ${message}\n`)
  process.exit(1)
}

const receive = (slug: string) => {
  const times = received.get(slug) ?? []
  times.push(now())
  received.set(slug, times)
  if (times.length === count) {
    received.delete(slug)
    times.sort((a, b) => a - b)
    process.stdout.write(`${JSON.stringify({ slug, last: times.at(-1), median: percentile(times, 50) })}\n`)
  }
}

const open = (i: number) => {
  const socket = net.connect(Number(url.port), url.hostname, () => socket.write(request))
  socket.setEncoding("latin1")
  // Bytes not yet looked at, kept across reads: a frame may arrive split.
  let pending = ""
  let isConnected = false
  socket.on("data", (chunk: string) => {
    pending += chunk
    if (!isConnected) {
      // A refusal (401, 429) is a whole answer that never says `: connected`: fail at its status line.
      const statusLine = pending.indexOf("\r\n")
      if (statusLine >= 0 && !pending.startsWith("HTTP/1.1 200")) fail(i, pending.slice(0, statusLine))
      const at = pending.indexOf(CONNECTED)
      if (at < 0) return
      isConnected = true
      pending = pending.slice(at + CONNECTED.length)
      if (++connected === count) process.stdout.write(`ready ${count}\n`)
      if (next < count) open(next++)
    }
    let from = 0
    for (let at = pending.indexOf(SLUG); at >= 0; at = pending.indexOf(SLUG, from)) {
      const end = pending.indexOf("\"", at + SLUG.length)
      if (end < 0) break
      receive(pending.slice(at + SLUG.length, end))
      from = end
    }
    const unfinished = pending.indexOf(SLUG, from)
    pending = unfinished >= 0 ? pending.slice(unfinished) : pending.slice(-SLUG.length)
  })
  socket.on("error", (error) => fail(i, error.message))
  socket.on("end", () => fail(i, "the server ended the stream"))
}

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  count += Number(/^open (\d+)$/.exec(line)?.[1] ?? 0)
  while (next < count && next - connected < OPENING_AT_ONCE) open(next++)
})
