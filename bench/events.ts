/**
 * `events`: 10,000 concurrent SSE streams on one main process (clients in a second process),
 * 100 page changes; latency from the change (the SQL that NOTIFYs) to the median and the last
 * client, and the server's RSS per idle stream. Beside it, the raw baseline of the same run (first,
 * on a quiet server): one LISTEN connection receiving the same NOTIFYs, no HTTP.
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Queue, Redacted } from "effect"
import { spawn } from "node:child_process"
import * as readline from "node:readline"
import { signIn, startBenchStack, summarize } from "./support.ts"

const STREAMS = Number(process.env.BENCH_EVENT_STREAMS ?? 10_000)
const CHANGES = 100

const now = () => performance.timeOrigin + performance.now()
const fmt = (ms: number) => ms.toFixed(1)

/** RSS after a full collection, settled: the figure per stream is a difference of two of these. */
const settledRss = async () => {
  await new Promise((resolve) => setTimeout(resolve, 1_000))
  globalThis.gc?.()
  return process.memoryUsage().rss
}

export const run = async () => {
  const stack = await startBenchStack({ EVENTS_MAX_STREAMS_PER_USER: String(STREAMS + 10) })
  try {
    const token = await signIn(stack, "events@bench.test", "member")

    // Raw baseline first, on a quiet server: the same NOTIFY heard on one LISTEN connection, no HTTP, no fan-out.
    const raw = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const pg = yield* PgClient.PgClient
      const notifications = yield* pg.listen("page_change")
      const samples: Array<number> = []
      for (let i = 0; i < CHANGES; i++) {
        const started = now()
        yield* pg`SELECT sys.create_page(${`raw-${i}`}, 'Raw', '')`
        yield* Queue.take(notifications)
        samples.push(now() - started)
      }
      return samples
    })).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(stack.adminUrl) }))))

    const child = spawn(process.execPath, ["bench/sse-clients.ts", stack.baseUrl, token], { stdio: ["pipe", "pipe", "inherit"] })
    const lines = readline.createInterface({ input: child.stdout })
    const waiting = new Map<string, (line: { last: number; median: number }) => void>()
    let ready: () => void = () => undefined
    lines.on("line", (line) => {
      if (line.startsWith("ready")) return ready()
      const report = JSON.parse(line) as { slug: string; last: number; median: number }
      waiting.get(report.slug)?.(report)
    })
    const open = (streams: number) => {
      const opened = new Promise<void>((resolve) => (ready = resolve))
      child.stdin.write(`open ${streams}\n`)
      return opened
    }
    // The memory of an idle stream is the difference between half and all of them, so the
    // process's one-time growth under the first connections (heap, buffers) is not counted.
    await open(STREAMS / 2)
    const rssHalf = await settledRss()
    await open(STREAMS / 2)
    const rssPerStream = (await settledRss() - rssHalf) / (STREAMS / 2)

    const last: Array<number> = []
    const median: Array<number> = []
    for (let i = 0; i < CHANGES; i++) {
      const slug = `bench-${i}`
      const delivered = new Promise<{ last: number; median: number }>((resolve) => waiting.set(slug, resolve))
      const started = now()
      await stack.admin((sql) => sql`SELECT sys.create_page(${slug}, 'Bench', '')`)
      const report = await delivered
      last.push(report.last - started)
      median.push(report.median - started)
    }
    child.kill()

    const l = summarize(last)
    const m = summarize(median)
    const r = summarize(raw)
    return [
      `### events: ${STREAMS.toLocaleString("en")} SSE streams, ${CHANGES} page changes (ms from the change)`,
      "",
      "| measure | p50 | p99 | max | target |",
      "| --- | --- | --- | --- | --- |",
      `| to the last client | ${fmt(l.p50)} | ${fmt(l.p99)} | ${fmt(l.max)} | p99 ≤ 150 |`,
      `| to the median client | ${fmt(m.p50)} | ${fmt(m.p99)} | ${fmt(m.max)} | |`,
      `| raw: one LISTEN connection, no HTTP | ${fmt(r.p50)} | ${fmt(r.p99)} | ${fmt(r.max)} | |`,
      "",
      `Server RSS per idle stream: ${(rssPerStream / 1024).toFixed(1)} KB (target ≤ 8 KB): the RSS difference between ${(STREAMS / 2).toLocaleString("en")} and ${STREAMS.toLocaleString("en")} open streams, each after a full GC.`
    ].join("\n")
  } finally {
    await stack.close()
  }
}

if (import.meta.main) console.log(await run())
