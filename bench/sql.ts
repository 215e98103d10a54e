/**
 * `sql-read` and `sql-write`: single-row statements through POST /sql under a row-level security
 * policy scoped to app.user_id (100,000 rows, 100 users, 32 concurrent clients from a second
 * process), beside the raw baseline of the same run: the identical transaction (BEGIN; the
 * settings statement; the statement; COMMIT) driven straight through @effect/sql-pg by 32 fibers,
 * with no HTTP, and beside the hand-written server the issue compares Plinth with
 * (bench/sql-handwritten.ts), under the same load. Rounds alternate between the three.
 */
import { PgClient } from "@effect/sql-pg"
import { Duration, Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { makeJsonColumnTypes } from "../src/services/JsonColumnTypes.ts"
import { percentile, spread, summarize } from "./stats.ts"
import { startHandwritten } from "./sql-handwritten.ts"
import { BENCH_JWT_SECRET, type BenchStack, rawTransaction, runLoad, signIn, startBenchStack } from "./support.ts"

const ROWS = 100_000
const USERS = 100
const CONNECTIONS = 32
const SECONDS = Number(process.env.BENCH_SECONDS ?? 15)
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 3)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)

interface User {
  readonly id: string
  readonly token: string
  readonly rows: ReadonlyArray<number>
}

interface Measure {
  readonly rps: number
  readonly p50: number
  readonly p99: number
  /** CPU time (user + system) of this process per request or transaction, warm-up included. */
  readonly cpuMicros: number
}

/** `work`'s result, with this process's CPU time over it divided by `count` of what it returns. */
const withCpu = async <A extends Omit<Measure, "cpuMicros">>(work: () => Promise<A>, count: (a: A) => number): Promise<A & { cpuMicros: number }> => {
  const before = process.cpuUsage()
  const result = await work()
  const used = process.cpuUsage(before)
  return { ...result, cpuMicros: (used.user + used.system) / count(result) }
}

export const setup = async (stack: BenchStack): Promise<ReadonlyArray<User>> => {
  await stack.admin((sql) => sql.unsafe(`
    CREATE TABLE public.bench_items (id bigint PRIMARY KEY, owner uuid NOT NULL, payload text NOT NULL, hits integer NOT NULL DEFAULT 0)`).unprepared)
  await stack.admin((sql) => sql.unsafe(`ALTER TABLE public.bench_items ENABLE ROW LEVEL SECURITY`).unprepared)
  await stack.admin((sql) => sql.unsafe(`CREATE POLICY own ON public.bench_items USING (owner = nullif(current_setting('app.user_id', true), '')::uuid)`).unprepared)
  await stack.admin((sql) => sql.unsafe(`GRANT SELECT, INSERT, UPDATE ON public.bench_items TO member`).unprepared)
  const users: Array<User> = []
  for (let u = 0; u < USERS; u++) {
    const token = await signIn(stack, `user${u}@bench.test`, "member")
    const id = JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString()).sub as string
    const first = u * (ROWS / USERS) + 1
    users.push({ id, token, rows: Array.from({ length: ROWS / USERS }, (_, i) => first + i) })
  }
  await stack.admin((sql) => sql`
    INSERT INTO public.bench_items (id, owner, payload)
    SELECT n, (${JSON.stringify(users.map((user) => user.id))}::jsonb ->> ((n - 1) / ${ROWS / USERS})::int)::uuid, md5(n::text)
    FROM generate_series(1, ${ROWS}) AS n`)
  await stack.admin((sql) => sql`ANALYZE public.bench_items`)
  return users
}

type Scenario = "read" | "write"
const statement = (scenario: Scenario) =>
  scenario === "read" ? "SELECT id, payload, hits FROM bench_items WHERE id = $1" : "UPDATE bench_items SET hits = hits + 1 WHERE id = $1"

/** A round of the load against the server at `baseUrl` (Plinth or the hand-written one). */
export const httpRound = async (baseUrl: string, users: ReadonlyArray<User>, scenario: Scenario): Promise<Measure> => {
  const requests = users.flatMap((user) =>
    user.rows.slice(0, 50).map((row) => ({ token: user.token, body: JSON.stringify({ sql: statement(scenario), params: [row] }) })))
  // Only the server under load runs in this process meanwhile (the load is another process).
  const result = await withCpu(
    () => runLoad({ url: `${baseUrl}/sql`, connections: CONNECTIONS, seconds: SECONDS, warmupSeconds: WARMUP_SECONDS, requests }),
    (load) => load.answered
  )
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`load had ${result.non2xx} non-2xx and ${result.errors} errors`)
  return result
}

/** The same transaction as a request's, 32 fibers at a time, for the same duration. */
const rawRound = (stack: BenchStack, users: ReadonlyArray<User>, scenario: Scenario) =>
  withCpu(() => Effect.runPromise(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const text = statement(scenario)
    const oneRequest = Effect.suspend(() => {
      const user = users[Math.floor(Math.random() * users.length)]!
      const row = user.rows[Math.floor(Math.random() * 50)]!
      return rawTransaction(sql, { role: "member", userId: user.id }, text, [String(row)])
    })
    const loop = (until: number, samples: Array<number>): Effect.Effect<void, unknown, SqlClient.SqlClient> =>
      Effect.suspend(() => {
        if (performance.now() >= until) return Effect.void
        const started = performance.now()
        return Effect.andThen(oneRequest, Effect.suspend(() => {
          samples.push(performance.now() - started)
          return loop(until, samples)
        }))
      })
    const warm: Array<number> = []
    yield* Effect.forEach(Array.from({ length: CONNECTIONS }), () => loop(performance.now() + WARMUP_SECONDS * 1000, warm), { concurrency: "unbounded" })
    const samples: Array<number> = []
    const started = performance.now()
    yield* Effect.forEach(Array.from({ length: CONNECTIONS }), () => loop(started + SECONDS * 1000, samples), { concurrency: "unbounded" })
    const seconds = (performance.now() - started) / 1000
    samples.sort((a, b) => a - b)
    return {
      rps: samples.length / seconds,
      p50: percentile(samples, 50),
      p99: percentile(samples, 99),
      transactions: warm.length + samples.length
    }
  }).pipe(Effect.provide(PgClient.layer({
    url: Redacted.make(stack.mainUrl),
    maxConnections: CONNECTIONS,
    types: makeJsonColumnTypes(),
    idleTimeout: Duration.seconds(30)
  })))), (measure) => measure.transactions)

const fmt = (value: number, digits = 0) => value.toFixed(digits)

export const run = async () => {
  const stack = await startBenchStack()
  const handwritten = await startHandwritten(stack.mainUrl, BENCH_JWT_SECRET, CONNECTIONS)
  try {
    const users = await setup(stack)
    const lines: Array<string> = []
    for (const scenario of ["read", "write"] as const) {
      const http: Array<Measure> = []
      const raw: Array<Measure> = []
      const hand: Array<Measure> = []
      for (let round = 0; round < ROUNDS; round++) {
        http.push(await httpRound(stack.baseUrl, users, scenario))
        raw.push(await rawRound(stack, users, scenario))
        hand.push(await httpRound(handwritten.url, users, scenario))
      }
      const ratio = summarize(http.map((measure, index) => measure.rps / raw[index]!.rps))
      const handRatio = summarize(hand.map((measure, index) => measure.rps / raw[index]!.rps))
      const p99 = summarize(http.map((m) => m.p99))
      const cpu = (measures: ReadonlyArray<Measure>) => fmt(summarize(measures.map((m) => m.cpuMicros)).p50)
      const target = scenario === "read" ? { ratio: 0.75, p99: 25 } : { ratio: 0.6, p99: 30 }
      lines.push(
        `| sql-${scenario} | ${spread(summarize(http.map((m) => m.rps)), 0)} | ${spread(summarize(raw.map((m) => m.rps)), 0)} | ` +
          `${fmt(ratio.min, 2)} / **${fmt(ratio.p50, 2)}** / ${fmt(ratio.max, 2)} | ${fmt(p99.p50, 1)} | ` +
          `${spread(summarize(hand.map((m) => m.rps)), 0)} | ${spread(handRatio, 2)} | ${cpu(http)} / ${cpu(hand)} / ${cpu(raw)} | ` +
          `≥ ${target.ratio} × raw, p99 ≤ ${target.p99} ms | ` +
          `${ratio.p50 >= target.ratio && p99.p50 <= target.p99 ? "met" : "not met"}; beats hand-written: ${ratio.p50 > handRatio.p50 ? "yes" : "no"} |`
      )
    }
    return [
      `### sql-read / sql-write: ${CONNECTIONS} clients, ${SECONDS} s after ${WARMUP_SECONDS} s warm-up, ${ROUNDS} interleaved rounds (min / median / max)`,
      "",
      "| scenario | Plinth req/s | raw @effect/sql-pg tx/s | ratio | Plinth p99 ms | hand-written req/s | hand-written ratio | CPU µs per request: Plinth / hand-written / raw per tx | target | |",
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
      ...lines,
      "",
      "pgbench is not part of the embedded PostgreSQL package, so the raw baseline is the @effect/sql-pg loop only. " +
        "The load comes from bench/http-load.ts, a small keep-alive client in a process of its own. " +
        "Hand-written: the server issue #8 compares Plinth with, one round trip and cached JWTs (bench/sql-handwritten.ts: node:http, jose, " +
        "the same driver; no framework, SQL guard, limits or error shapes), under the same load. " +
        "CPU µs (medians): the user and system time of the process running the server (per request, warm-up included) and of the raw loop " +
        "(per transaction), PostgreSQL and the load generator not counted. The server's process is one thread, so at N µs a request " +
        "it answers at most 1,000,000 / N per second; PostgreSQL and the load generator share the other core."
    ].join("\n")
  } finally {
    await handwritten.close()
    await stack.close()
  }
}

if (import.meta.main) console.log(await run())
