/**
 * `npm run soak` (not in CI): SOAK_MINUTES (default 10) of steady POST /sql load (reads and writes
 * under row-level security, 16 clients from a second process) with SSE clients connected (a third
 * process) and a page change every slice. After each 30 s slice the service's process is
 * garbage-collected and its memory sampled; the first minute is warm-up. Pass: memory growth after
 * warm-up ≤ 5 %, no failed request, every stream still connected. Then the long runs of two
 * property tests: 10,000 fuzz bodies per JSON endpoint, 200 `/continue` races over two chat
 * instances. Figures go to docs/reliability.md.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { type BenchStack, runLoad, signIn, startBenchStack } from "./support.ts"

const MINUTES = Number(process.env.SOAK_MINUTES ?? 10)
const SLICE_SECONDS = 30
const WARMUP_SLICES = 2
const USERS = 10
const STREAMS = 200
const CONNECTIONS = 16

interface Slice {
  readonly rps: number
  readonly p99: number
  readonly failed: number
  readonly rss: number
  readonly heap: number
  readonly changesSeen: number
}

const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined)

const setup = async (stack: BenchStack) => {
  for (
    const ddl of [
      "CREATE TABLE public.soak_items (id bigint PRIMARY KEY, owner uuid NOT NULL, hits integer NOT NULL DEFAULT 0)",
      "ALTER TABLE public.soak_items ENABLE ROW LEVEL SECURITY",
      "CREATE POLICY own ON public.soak_items USING (owner = nullif(current_setting('app.user_id', true), '')::uuid)",
      "GRANT SELECT, INSERT, UPDATE ON public.soak_items TO member"
    ]
  ) await stack.admin((sql) => sql.unsafe(ddl).unprepared)
  const tokens: Array<string> = []
  for (let u = 0; u < USERS; u++) {
    const token = await signIn(stack, `soak${u}@bench.test`, "member")
    const id = JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString()).sub as string
    await stack.admin((sql) => sql`INSERT INTO public.soak_items (id, owner) SELECT ${u} * 100 + n, ${id}::uuid FROM generate_series(1, 100) AS n`)
    tokens.push(token)
  }
  return { tokens, owner: await signIn(stack, "owner@bench.test", "owner") }
}

const requestsOf = (tokens: ReadonlyArray<string>) =>
  tokens.flatMap((token, u) =>
    Array.from({ length: 20 }, (_, i) => ({
      token,
      body: JSON.stringify(
        i % 4 === 0
          ? { sql: "UPDATE soak_items SET hits = hits + 1 WHERE id = $1", params: [u * 100 + i + 1] }
          : { sql: "SELECT id, hits FROM soak_items WHERE id = $1", params: [u * 100 + i + 1] }
      )
    })))

const sseClients = (base: string, token: string) =>
  new Promise<{ child: ChildProcess; seen: () => number }>((resolve, reject) => {
    const child = spawn(process.execPath, ["bench/sse-clients.ts", base, token], { stdio: ["pipe", "pipe", "inherit"] })
    let out = ""
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString()
      if (out.startsWith("ready ")) resolve({ child, seen: () => out.split("\n").filter((line) => line.startsWith("{")).length })
    })
    child.stdin!.write(`open ${STREAMS}\n`)
    child.on("exit", (code) => reject(new Error(`SSE clients exited ${code}`)))
  })

const FUZZ_RUNS = 10_000
const RACE_RUNS = 200

/** The CI property tests with their soak-sized run counts, through vitest as in CI. */
const longProperties = () => {
  const run = spawnSync("npx", ["vitest", "run", "test/reliability/Fuzz.test.ts", "test/chat/Concurrency.test.ts"], {
    env: { ...process.env, FUZZ_RUNS: String(FUZZ_RUNS), CHAT_RACE_RUNS: String(RACE_RUNS), NO_COLOR: "1", FORCE_COLOR: "0" },
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
    maxBuffer: 256 * 1024 * 1024
  })
  // Kept whole: a failure there is found by reading it.
  const log = path.join(os.tmpdir(), "plinth-soak-properties.log")
  writeFileSync(log, `${run.stdout ?? ""}\n${run.error?.message ?? ""}`)
  console.error(`property runs: exit ${run.status}, output in ${log}`)
  const tests = /Tests\s+(.*)$/m.exec(run.stdout ?? "")?.[1]?.trim() ?? "no result"
  return { passed: run.status === 0, summary: `tests: ${tests}` }
}

const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1)

const stack = await startBenchStack({ EVENTS_MAX_STREAMS_PER_USER: String(STREAMS + 10) })
let clients: ChildProcess | undefined
try {
  const { tokens, owner } = await setup(stack)
  const sse = await sseClients(stack.baseUrl, tokens[0]!)
  clients = sse.child
  let streamsAlive = true
  clients.on("exit", () => (streamsAlive = false))
  const plan = { url: `${stack.baseUrl}/sql`, connections: CONNECTIONS, seconds: SLICE_SECONDS, warmupSeconds: 0, requests: requestsOf(tokens) }
  const slices: Array<Slice> = []
  const count = Math.max(WARMUP_SLICES + 1, Math.round((MINUTES * 60) / SLICE_SECONDS))
  for (let i = 0; i < count; i++) {
    const changed = fetch(`${stack.baseUrl}/sql`, {
      method: "POST",
      headers: { authorization: `Bearer ${owner}`, "content-type": "application/json" },
      // A new slug each time: the stream clients count each slug's arrival once.
      body: JSON.stringify({ sql: "SELECT sys.create_page($1, $2, $3)", params: [`soak-${i}`, `Soak ${i}`, "{}"] })
    })
    const load = await runLoad(plan)
    await changed
    gc()
    const memory = process.memoryUsage()
    slices.push({ rps: load.rps, p99: load.p99, failed: load.non2xx + load.errors, rss: memory.rss, heap: memory.heapUsed, changesSeen: sse.seen() })
    console.error(`slice ${i + 1}/${count}: ${load.rps.toFixed(0)} req/s, p99 ${load.p99.toFixed(1)} ms, failed ${load.non2xx + load.errors}, RSS ${mib(memory.rss)} MiB, heap ${mib(memory.heapUsed)} MiB`)
  }
  const base = slices[WARMUP_SLICES - 1]!
  const last = slices.at(-1)!
  const maxRss = Math.max(...slices.slice(WARMUP_SLICES).map((s) => s.rss))
  const rssGrowth = (last.rss - base.rss) / base.rss
  const heapGrowth = (last.heap - base.heap) / base.heap
  const failed = slices.reduce((n, s) => n + s.failed, 0)
  const total = slices.reduce((n, s) => n + s.rps * SLICE_SECONDS, 0)
  const properties = longProperties()
  const pass = properties.passed && rssGrowth <= 0.05 && failed === 0 && streamsAlive && last.changesSeen === count
  const report = [
    "# Reliability",
    "",
    `## Soak (\`npm run soak\`, ${new Date().toISOString().slice(0, 10)})`,
    "",
    `${MINUTES} minutes on ${os.cpus().length} cores, Node ${process.version}, embedded PostgreSQL 18, all on one machine: ` +
    `${CONNECTIONS} clients of POST /sql (3 reads to 1 write, row-level security, ${USERS} users) from a second process, ` +
    `${STREAMS} event streams from a third, a page change every ${SLICE_SECONDS} s. Memory is the service's process after a forced GC, ` +
    `sampled after each ${SLICE_SECONDS} s slice; the first ${WARMUP_SLICES} slices are warm-up.`,
    "",
    "| | figure | target | |",
    "| --- | --- | --- | --- |",
    `| requests | ${Math.round(total)} (${(total / (count * SLICE_SECONDS)).toFixed(0)} req/s) | | |`,
    `| failed requests (non-2xx or errors) | ${failed} | 0 | ${failed === 0 ? "met" : "not met"} |`,
    `| RSS after warm-up → end (max) | ${mib(base.rss)} → ${mib(last.rss)} MiB (${mib(maxRss)}) | | |`,
    `| RSS growth after warm-up | ${(rssGrowth * 100).toFixed(1)} % | ≤ 5 % | ${rssGrowth <= 0.05 ? "met" : "not met"} |`,
    `| heap used after warm-up → end | ${mib(base.heap)} → ${mib(last.heap)} MiB (${(heapGrowth * 100).toFixed(1)} %) | | |`,
    `| event streams connected at the end | ${streamsAlive ? STREAMS : "lost"} of ${STREAMS} | all | ${streamsAlive ? "met" : "not met"} |`,
    `| page changes received by every stream | ${last.changesSeen} of ${count} | all | ${last.changesSeen === count ? "met" : "not met"} |`,
    `| p99 latency per slice (min / max) | ${Math.min(...slices.map((s) => s.p99)).toFixed(1)} / ${Math.max(...slices.map((s) => s.p99)).toFixed(1)} ms | | |`,
    `| fuzz (${FUZZ_RUNS} bodies per JSON endpoint) and \`/continue\` races (${RACE_RUNS} over two chat instances) | ${properties.summary} | all pass | ${properties.passed ? "met" : "not met"} |`,
    "",
    pass ? "Result: **pass**." : "Result: **fail**.",
    ""
  ]
  const existing = (() => {
    try {
      return readFileSync("docs/reliability.md", "utf8")
    } catch {
      return ""
    }
  })()
  const rest = existing.includes("\n## Faults") ? existing.slice(existing.indexOf("\n## Faults")) : ""
  mkdirSync("docs", { recursive: true })
  writeFileSync("docs/reliability.md", report.join("\n") + rest)
  console.log(report.join("\n"))
  process.exitCode = pass ? 0 : 1
} finally {
  clients?.kill()
  await stack.close()
}
