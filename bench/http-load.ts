/**
 * The load generator of the HTTP benchmarks, in a process of its own: `connections` keep-alive
 * connections, each sending its next POST as soon as the last answer is in, each request a random
 * one of the plan's (bodies and headers built once, before the clock starts). Prints, per run, one
 * JSON line with requests per second, latency percentiles and the measured requests' latency histogram (so
 * the bench can merge several runs' latencies).
 *
 * A small client rather than autocannon: on 2 cores the load generator's CPU time is taken from
 * the server and the database, which the raw baseline (no HTTP) never pays. Measured here,
 * autocannon spent ~71 µs per request and this one ~38. It reads just enough of each response to
 * find its end and its status (Content-Length or chunked bodies).
 * Usage: node bench/http-load.ts <plan.json: {url, connections, requests: [{token, body}]}>, then one
 * `{seconds, warmupSeconds}` line on stdin per run.
 */
import { readFileSync } from "node:fs"
import net from "node:net"
import { createInterface } from "node:readline"
import { histogramOf, percentile } from "./stats.ts"

interface Plan {
  readonly url: string
  readonly connections: number
  readonly requests: ReadonlyArray<{ readonly token: string; readonly body: string }>
}

interface Tally {
  readonly latencies: Array<number>
  non2xx: number
  errors: number
}

const plan = JSON.parse(readFileSync(process.argv[2] ?? "", "utf8")) as Plan
const url = new URL(plan.url)
const wire = plan.requests.map(({ body, token }) => {
  const bytes = Buffer.from(body)
  return Buffer.concat([
    Buffer.from(
      `POST ${url.pathname}${url.search} HTTP/1.1\r\nhost: ${url.host}\r\ncontent-type: application/json\r\n` +
        `authorization: Bearer ${token}\r\ncontent-length: ${bytes.length}\r\n\r\n`
    ),
    bytes
  ])
})
const pick = () => wire[Math.floor(Math.random() * wire.length)]!

const HEAD_END = Buffer.from("\r\n\r\n")
const CRLF = Buffer.from("\r\n")

/**
 * Where the response at the start of `buffer` ends and its status, or undefined while it is not
 * all there. Chunk extensions and trailers are not used by the server under test.
 */
const responseEnd = (buffer: Buffer): { readonly end: number; readonly status: number } | undefined => {
  const headEnd = buffer.indexOf(HEAD_END)
  if (headEnd === -1) return undefined
  const head = buffer.toString("latin1", 0, headEnd).toLowerCase()
  const status = Number(head.slice(9, 12))
  const length = /\r\ncontent-length: *(\d+)/.exec(head)
  if (length !== null) {
    const end = headEnd + 4 + Number(length[1])
    return buffer.length >= end ? { end, status } : undefined
  }
  if (!head.includes("transfer-encoding: chunked")) return { end: headEnd + 4, status }
  let at = headEnd + 4
  for (;;) {
    const lineEnd = buffer.indexOf(CRLF, at)
    if (lineEnd === -1) return undefined
    const size = parseInt(buffer.toString("latin1", at, lineEnd), 16)
    const next = lineEnd + 2 + size + 2
    if (buffer.length < next) return undefined
    if (size === 0) return { end: next, status }
    at = next
  }
}

/** One connection's loop until `until`; its latencies in ms. */
const drive = (until: number, tally: Tally) =>
  new Promise<void>((resolve) => {
    const socket = net.connect(Number(url.port), url.hostname)
    socket.setNoDelay(true)
    let pending: Buffer = Buffer.alloc(0)
    let sentAt = 0
    const send = () => {
      if (performance.now() >= until) {
        socket.end()
        return resolve()
      }
      sentAt = performance.now()
      socket.write(pick())
    }
    socket.on("connect", send)
    socket.on("data", (chunk: Buffer) => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk])
      const response = responseEnd(pending)
      if (response === undefined) return
      tally.latencies.push(performance.now() - sentAt)
      if (response.status < 200 || response.status > 299) tally.non2xx++
      pending = pending.subarray(response.end)
      send()
    })
    socket.on("error", () => {
      tally.errors++
      resolve()
    })
  })

const run = async (seconds: number) => {
  const tally: Tally = { latencies: [], non2xx: 0, errors: 0 }
  const until = performance.now() + seconds * 1000
  await Promise.all(Array.from({ length: plan.connections }, () => drive(until, tally)))
  const sorted = tally.latencies.sort((a, b) => a - b)
  return {
    rps: sorted.length / seconds,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    non2xx: tally.non2xx,
    errors: tally.errors,
    requests: sorted.length,
    histogram: histogramOf(sorted)
  }
}

/** A warm-up, not measured, then `seconds` measured; `answered` counts both. */
const once = async (seconds: number, warmupSeconds: number) => {
  const warmup = warmupSeconds > 0 ? await run(warmupSeconds) : undefined
  const measured = await run(seconds)
  // Every request the server answered, warm-up included: what its CPU time over the run is divided by.
  const answered = Math.round(measured.rps * seconds + (warmup === undefined ? 0 : warmup.rps * warmupSeconds))
  return { ...measured, answered }
}

// One `{seconds, warmupSeconds}` line in, one result line out, until stdin ends (bench/support.ts `startLoadGenerator`).
for await (const line of createInterface({ input: process.stdin })) {
  const { seconds, warmupSeconds } = JSON.parse(line) as { seconds: number; warmupSeconds: number }
  process.stdout.write(`${JSON.stringify(await once(seconds, warmupSeconds))}\n`)
}
