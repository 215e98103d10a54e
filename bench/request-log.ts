/**
 * The request log's own cost: CPU µs per request line, the way `plinth serve main` writes it now
 * (src/http/RequestLog.ts: built by hand, batched) beside the way it did before (`Effect.logInfo`
 * with the line's annotations through the production JSON logger, one write per line), both with
 * Plinth's production logging layer (LoggingLive, NODE_ENV=production) and stdout a pipe, as under
 * a process manager or a log collector. Each way runs in a child process of its own whose stdout
 * this process reads and throws away; a child's CPU time (user + system, so its writes count) less
 * that of the same loop logging nothing, divided by the lines, is the figure. Two loops: lines
 * back to back (a busy server: batches fill to their size), and one line per event-loop turn (a
 * quiet one: every batch is one line).
 * Usage: ./node_modules/.bin/node bench/request-log.ts [lines, default 100000] [rounds, default 3]
 */
import { ConfigProvider, Context, Effect, Layer } from "effect"
import { spawn } from "node:child_process"
import { writeSync } from "node:fs"
import { noRequestLog, RequestLog, type RequestLogger, viaEffectLogger } from "../src/http/RequestLog.ts"
import { LoggingLive } from "../src/layers/Logging.ts"
import { PlinthConfig } from "../src/services/PlinthConfig.ts"
import { summarize } from "./stats.ts"

const WAYS = ["none", "old", "new"] as const
const LOOPS = ["back to back", "one per turn"] as const
type Way = typeof WAYS[number]
type Loop = typeof LOOPS[number]

/** In the child: `lines` lines logged `way`, in `loop`; prints the CPU µs it took on stderr. */
const child = async (way: Way, loop: Loop, lines: number) => {
  const production = LoggingLive.pipe(
    Layer.provideMerge(PlinthConfig.layer),
    Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env: { NODE_ENV: "production", JWT_SECRET: "request-log-bench-secret-0123456789abcdef" } })))
  )
  const program = Effect.gen(function*() {
    const batched = yield* Effect.service(RequestLog)
    const logger: RequestLogger = way === "none" ? noRequestLog : way === "old" ? viaEffectLogger : batched
    const nextTurn = Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
    const once = (i: number) => logger.log("POST", "/sql", 200, `${(i % 100) / 10}ms`, `bench-${i}`)
    // Warm-up: the same loop, a tenth as long.
    for (const count of [Math.ceil(lines / 10), lines]) {
      const before = process.cpuUsage()
      for (let i = 0; i < count; i++) {
        yield* once(i)
        if (loop === "one per turn") yield* nextTurn
      }
      yield* nextTurn
      const used = process.cpuUsage(before)
      if (count === lines) writeSync(2, `${JSON.stringify({ micros: used.user + used.system })}\n`)
    }
  })
  await Effect.runPromise(Effect.scoped(Effect.provide(program, production)).pipe(Effect.asVoid))
}

/** Runs one child; its stdout (the log) is read and dropped, as a collector would take it. */
const runChild = (way: Way, loop: Loop, lines: number) =>
  new Promise<number>((resolve, reject) => {
    const run = spawn(process.execPath, [...process.execArgv, import.meta.filename, "--child", way, loop, String(lines)], {
      stdio: ["ignore", "pipe", "pipe"]
    })
    run.stdout.on("data", () => {})
    let err = ""
    run.stderr.on("data", (chunk: Buffer) => (err += chunk.toString("utf8")))
    run.on("exit", (code) => {
      const last = err.trim().split("\n").at(-1) ?? ""
      if (code !== 0 || !last.startsWith("{")) return reject(new Error(`${way} / ${loop} exited ${code}: ${err}`))
      resolve((JSON.parse(last) as { micros: number }).micros)
    })
  })

const main = async () => {
  const lines = Number(process.argv[2] ?? 100_000)
  const rounds = Number(process.argv[3] ?? 3)
  const rows: Array<string> = []
  for (const loop of LOOPS) {
    const count = loop === "one per turn" ? Math.ceil(lines / 5) : lines
    const per: Record<Way, Array<number>> = { none: [], old: [], new: [] }
    for (let round = 0; round < rounds; round++) {
      const micros = {} as Record<Way, number>
      for (const way of WAYS) micros[way] = await runChild(way, loop, count)
      for (const way of WAYS) per[way].push((micros[way] - micros.none) / count)
    }
    const cell = (way: Way) => {
      const s = summarize(per[way])
      return `${s.min.toFixed(2)} / **${s.p50.toFixed(2)}** / ${s.max.toFixed(2)}`
    }
    rows.push(`| ${loop} (${count} lines) | ${cell("old")} | ${cell("new")} |`)
  }
  console.log([
    `CPU µs per request line (min / median / max of ${rounds} interleaved rounds; each less the same loop logging nothing), ${process.version}`,
    "",
    "| loop | before: Effect.logInfo + JSON logger | now: RequestLog, batched |",
    "| --- | --- | --- |",
    ...rows
  ].join("\n"))
}

if (process.argv[2] === "--child") await child(process.argv[3] as Way, process.argv[4] as Loop, Number(process.argv[5]))
else await main()
