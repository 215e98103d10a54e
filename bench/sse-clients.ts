/**
 * The load side of the `events` bench, in a process of its own: opens event streams in steps
 * (each line `open <n>` on stdin opens n more and is answered `ready <total>` once all are
 * connected), and for each page change reports when its last client (and its median client)
 * received it. Usage: node bench/sse-clients.ts <base-url> <jwt>
 */
import * as http from "node:http"
import * as readline from "node:readline"

const [base, token] = process.argv.slice(2)
const received = new Map<string, Array<number>>()
let connected = 0
let count = 0

const now = () => performance.timeOrigin + performance.now()

const report = (slug: string, times: Array<number>) => {
  times.sort((a, b) => a - b)
  process.stdout.write(`${JSON.stringify({ slug, last: times.at(-1), median: times[Math.floor(times.length / 2)] })}\n`)
}

const open = (i: number) => {
  const request = http.get(`${base}/events`, { headers: { authorization: `Bearer ${token}` }, agent: false }, (response) => {
    let buffer = ""
    let isConnected = false
    response.setEncoding("utf8")
    response.on("data", (chunk: string) => {
      buffer += chunk
      if (!isConnected && buffer.includes(": connected")) {
        isConnected = true
        if (++connected === count) process.stdout.write(`ready ${count}\n`)
      }
      for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
        const frame = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        const data = /^data: (.*)$/m.exec(frame)?.[1]
        if (!frame.startsWith("event: page_change") || data === undefined) continue
        const slug = (JSON.parse(data) as { slug: string }).slug
        const times = received.get(slug) ?? []
        times.push(now())
        received.set(slug, times)
        if (times.length === count) report(slug, times)
      }
    })
  })
  request.on("error", (error) => {
    process.stderr.write(`stream ${i}: ${error.message}\n`)
    process.exit(1)
  })
}

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const more = Number(/^open (\d+)$/.exec(line)?.[1] ?? 0)
  const first = count
  count += more
  for (let i = first; i < count; i++) open(i)
})
