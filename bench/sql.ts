/**
 * `sql-read` and `sql-write`: single-row statements through POST /sql under a row-level security
 * policy scoped to app.user_id (100,000 rows, 100 users, 32 concurrent clients from a second
 * process), beside the raw baseline of the same run: the identical transaction (BEGIN; the
 * settings statement; the statement; COMMIT) driven straight through @effect/sql-pg by 32 fibers,
 * with no HTTP. Beside them, under the same load, the servers issue #8 compares Plinth with on
 * `sql-read` (bench/sql-fastify.ts, bench/sql-postgraphile.ts), and a leaner hand-written server
 * than any of those (bench/sql-handwritten.ts). And Plinth as users run it: `plinth serve main`
 * from the built code in a process of its own, production defaults (request log on), and the same
 * with LOG_REQUESTS=false (issue #23). Each round runs the raw loop, then the HTTP servers in
 * slices, in turn within each slice, so that all of them are measured across the same stretch of
 * time (the machine's speed drifts within a round).
 */
import { PgClient } from "@effect/sql-pg"
import { Duration, Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { makeJsonColumnTypes } from "../src/services/JsonColumnTypes.ts"
import { type Histogram, histogramPercentile, mergeHistograms, percentile, spread, summarize } from "./stats.ts"
import { startFastify } from "./sql-fastify.ts"
import { startHandwritten } from "./sql-handwritten.ts"
import { POSTGRAPHILE_READ, startPostGraphile } from "./sql-postgraphile.ts"
import {
  BENCH_JWT_SECRET,
  type BenchStack,
  buildPlinth,
  type ComparatorServer,
  rawClosedLoop,
  rawTransaction,
  type ServedPlinth,
  signIn,
  startBenchStack,
  startLoadGenerator,
  startServedPlinth
} from "./support.ts"

const ROWS = 100_000
const USERS = 100
const CONNECTIONS = 32
const SECONDS = Number(process.env.BENCH_SECONDS ?? 15)
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 3)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const SLICES = Number(process.env.BENCH_SLICES ?? 5)
/** The warm-up of a server's slices after its first (its load generator opens new connections), not measured. */
const SLICE_WARMUP_SECONDS = 0.5

interface User {
  readonly id: string
  readonly token: string
  readonly rows: ReadonlyArray<number>
}

interface Measure {
  readonly rps: number
  readonly p50: number
  readonly p99: number
  /** CPU time (user + system) of the server's process per request or transaction, warm-up included. */
  readonly cpuMicros: number
}

/** CPU time (user + system) of this process so far, in µs. */
const ownCpuMicros = () => {
  const used = process.cpuUsage()
  return used.user + used.system
}

/** `work`'s result, with the CPU time `cpu` reads over it divided by `count` of what it returns. */
const withCpu = async <A extends Omit<Measure, "cpuMicros">>(
  work: () => Promise<A>,
  count: (a: A) => number,
  cpu: () => number = ownCpuMicros
): Promise<A & { cpuMicros: number }> => {
  const before = cpu()
  const result = await work()
  return { ...result, cpuMicros: (cpu() - before) / count(result) }
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

/** Where a server under load takes the statement, and the body of a request for `row`. */
interface Endpoint {
  readonly url: string
  readonly body: (text: string, row: number) => string
}

/** POST /sql: Plinth's, and that of the hand-written servers answering as it does. */
const sqlEndpoint = (baseUrl: string): Endpoint => ({ url: `${baseUrl}/sql`, body: (text, row) => JSON.stringify({ sql: text, params: [row] }) })

/** PostGraphile's GraphQL endpoint: the read only (the issue compares it on `sql-read`). */
const graphqlEndpoint = (baseUrl: string): Endpoint => ({
  url: `${baseUrl}/graphql`,
  body: (_text, row) => JSON.stringify({ query: POSTGRAPHILE_READ, variables: { id: String(row) } })
})

/** A server under load in a round; `cpu` reads the CPU time of its process (this one's unless told). */
interface Loaded {
  readonly endpoint: Endpoint
  readonly cpu?: () => number
}

/**
 * One round of the load against every one of `servers`, in SLICES slices: in each slice every
 * server takes SECONDS / SLICES seconds of load in turn, the order rotating from slice to slice
 * (starting at `first`). A server's Measure is that of its slices together: requests over seconds
 * measured, percentiles of their merged latencies, CPU time over every request it answered
 * (warm-ups included).
 */
export const slicedRound = async (
  servers: ReadonlyArray<Loaded>,
  users: ReadonlyArray<User>,
  scenario: Scenario,
  first = 0
): Promise<Array<Measure & { readonly answered: number }>> => {
  const tallies = servers.map(({ endpoint }) => ({
    // One load generator per server for the round, warm from its first slice on.
    load: startLoadGenerator({
      url: endpoint.url,
      connections: CONNECTIONS,
      requests: users.flatMap((user) => user.rows.slice(0, 50).map((row) => ({ token: user.token, body: endpoint.body(statement(scenario), row) })))
    }),
    measured: 0,
    answered: 0,
    cpuMicros: 0,
    histograms: new Array<Histogram>()
  }))
  for (let slice = 0; slice < SLICES; slice++) {
    for (let turn = 0; turn < servers.length; turn++) {
      const index = (first + slice + turn) % servers.length
      const { cpu = ownCpuMicros } = servers[index]!
      const tally = tallies[index]!
      // Only the server under load runs meanwhile (the load is another process; the others wait).
      const before = cpu()
      const load = await tally.load.run(SECONDS / SLICES, slice === 0 ? WARMUP_SECONDS : SLICE_WARMUP_SECONDS)
      tally.cpuMicros += cpu() - before
      if (load.non2xx > 0 || load.errors > 0) throw new Error(`load had ${load.non2xx} non-2xx and ${load.errors} errors`)
      tally.measured += load.requests
      tally.answered += load.answered
      tally.histograms.push(load.histogram)
    }
  }
  await Promise.all(tallies.map((tally) => tally.load.close()))
  return tallies.map((tally) => {
    const latencies = mergeHistograms(tally.histograms)
    return {
      rps: tally.measured / SECONDS,
      p50: histogramPercentile(latencies, 50),
      p99: histogramPercentile(latencies, 99),
      cpuMicros: tally.cpuMicros / tally.answered,
      answered: tally.answered
    }
  })
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
    const { samples, seconds, warmed } = yield* rawClosedLoop(oneRequest, { connections: CONNECTIONS, warmupSeconds: WARMUP_SECONDS, seconds: SECONDS })
    return {
      rps: samples.length / seconds,
      p50: percentile(samples, 50),
      p99: percentile(samples, 99),
      transactions: warmed + samples.length
    }
  }).pipe(Effect.provide(PgClient.layer({
    url: Redacted.make(stack.mainUrl),
    maxConnections: CONNECTIONS,
    types: makeJsonColumnTypes(),
    idleTimeout: Duration.seconds(30)
  })))), (measure) => measure.transactions)

const fmt = (value: number, digits = 0) => value.toFixed(digits)

interface Comparator {
  readonly name: string
  readonly endpoint: Endpoint
  readonly scenarios: ReadonlyArray<Scenario>
  /** One of the three servers issue #8 says Plinth must beat on `sql-read`. */
  readonly named: boolean
}

/**
 * Issue #23's targets for `plinth serve main` (production defaults): on sql-read ≥ 1.6 × the
 * hand-written Fastify server and ≥ 2.5 × PostGraphile 5, p99 ≤ 25 ms, CPU per request ≤ 1.3 × the
 * lean reference's; on both, the request log costing ≤ 5 % of the throughput with LOG_REQUESTS=false.
 */
const issue23Targets = (
  scenario: Scenario,
  logged: ReadonlyArray<Measure>,
  quiet: ReadonlyArray<Measure>,
  others: ReadonlyArray<{ readonly comparator: Comparator; readonly measures: ReadonlyArray<Measure> }>
): Array<string> => {
  const perRound = (theirs: ReadonlyArray<Measure>) => summarize(logged.map((measure, index) => measure.rps / theirs[index]!.rps))
  const row = (measure: string, value: { min: number; p50: number; max: number } | number, target: string, met: boolean) =>
    `| sql-${scenario} | ${measure} | ${typeof value === "number" ? fmt(value, 2) : spread(value, 2, true)} | ${target} | ${met ? "met" : "not met"} |`
  const rows: Array<string> = []
  const against = (name: string, minimum: number) => {
    const found = others.find((other) => other.comparator.name === name)
    if (found === undefined) return
    const ratio = perRound(found.measures)
    rows.push(row(`req/s over ${name}'s`, ratio, `≥ ${minimum}`, ratio.p50 >= minimum))
  }
  if (scenario === "read") {
    against("Fastify + postgres.js + jose", 1.6)
    against("PostGraphile 5", 2.5)
    const p99 = summarize(logged.map((m) => m.p99))
    rows.push(row("p99 ms", p99, "≤ 25", p99.p50 <= 25))
    const lean = others.find((other) => !other.comparator.named)
    if (lean !== undefined) {
      const ratio = summarize(logged.map((m) => m.cpuMicros)).p50 / summarize(lean.measures.map((m) => m.cpuMicros)).p50
      rows.push(row("CPU µs per request over the lean reference's", ratio, "≤ 1.3", ratio <= 1.3))
    }
  }
  const log = perRound(quiet)
  rows.push(row("req/s with the request log over req/s with LOG_REQUESTS=false", log, "≥ 0.95 (the log costs ≤ 5 %)", log.p50 >= 0.95))
  return rows
}

/** `plinth serve main` as users run it, and the same without its request log. */
interface Served {
  readonly name: string
  readonly server: ServedPlinth
}

export const run = async () => {
  buildPlinth()
  // The servers of a round keep their pools open through its slices (up to 32 connections each), beside the raw loop's 32.
  const stack = await startBenchStack({}, { settings: { max_connections: "300" } })
  const servers: Array<ComparatorServer> = []
  const start = async (server: Promise<ComparatorServer>) => {
    const started = await server
    servers.push(started)
    return started.url
  }
  try {
    const users = await setup(stack)
    const logged = await startServedPlinth(stack)
    servers.push(logged)
    const quiet = await startServedPlinth(stack, { LOG_REQUESTS: "false" })
    servers.push(quiet)
    const served: ReadonlyArray<Served> = [
      { name: "`plinth serve main` (built, production defaults: request log on)", server: logged },
      { name: "`plinth serve main`, LOG_REQUESTS=false", server: quiet }
    ]
    let loggedAnswered = 0
    const comparators: ReadonlyArray<Comparator> = [
      {
        name: "Fastify + postgres.js + jose",
        endpoint: sqlEndpoint(await start(startFastify(stack.mainUrl, BENCH_JWT_SECRET, CONNECTIONS, { oneRoundTrip: false }))),
        scenarios: ["read"],
        named: true
      },
      {
        name: "PostGraphile 5",
        endpoint: graphqlEndpoint(await start(startPostGraphile(stack.mainUrl, BENCH_JWT_SECRET, CONNECTIONS))),
        scenarios: ["read"],
        named: true
      },
      {
        name: "the same Fastify server, one round trip, cached JWTs",
        endpoint: sqlEndpoint(await start(startFastify(stack.mainUrl, BENCH_JWT_SECRET, CONNECTIONS, { oneRoundTrip: true }))),
        scenarios: ["read"],
        named: true
      },
      {
        name: "lean hand-written: node:http + @effect/sql-pg, one round trip, cached JWTs",
        endpoint: sqlEndpoint(await start(startHandwritten(stack.mainUrl, BENCH_JWT_SECRET, CONNECTIONS))),
        scenarios: ["read", "write"],
        named: false
      }
    ]
    const lines: Array<string> = []
    const comparatorLines: Array<string> = []
    const servedTargets: Array<string> = []
    for (const scenario of ["read", "write"] as const) {
      const those = comparators.filter((comparator) => comparator.scenarios.includes(scenario))
      const http: Array<Measure> = []
      const raw: Array<Measure> = []
      const others = those.map(() => new Array<Measure>())
      const servedMeasures = served.map(() => new Array<Measure>())
      for (let round = 0; round < ROUNDS; round++) {
        raw.push(await rawRound(stack, users, scenario))
        const [plinth, ...rest] = await slicedRound([
          { endpoint: sqlEndpoint(stack.baseUrl) },
          ...served.map(({ server }) => ({ endpoint: sqlEndpoint(server.url), cpu: server.cpuMicros })),
          ...those.map((comparator) => ({ endpoint: comparator.endpoint }))
        ], users, scenario, round)
        http.push(plinth!)
        for (const index of served.keys()) servedMeasures[index]!.push(rest[index]!)
        for (const index of those.keys()) others[index]!.push(rest[served.length + index]!)
        loggedAnswered += rest[0]!.answered
      }
      const ratioOf = (measures: ReadonlyArray<Measure>) => summarize(measures.map((measure, index) => measure.rps / raw[index]!.rps))
      const ratio = ratioOf(http)
      const p99 = summarize(http.map((m) => m.p99))
      const cpu = (measures: ReadonlyArray<Measure>) => fmt(summarize(measures.map((m) => m.cpuMicros)).p50)
      const results = those.map((comparator, index) => {
        const measures = others[index]!
        const theirs = ratioOf(measures)
        return { comparator, measures, ratio: theirs, beaten: ratio.p50 > theirs.p50 }
      })
      for (const { beaten, comparator, measures, ratio: theirs } of results) {
        comparatorLines.push(
          `| sql-${scenario} | ${comparator.name}${comparator.named ? "" : " (not one of the issue's three)"} | ` +
            `${spread(summarize(measures.map((m) => m.rps)), 0)} | ${spread(theirs, 2)} | ${cpu(measures)} | ${beaten ? "yes" : "no"} |`
        )
      }
      const named = results.filter((result) => result.comparator.named)
      const target = scenario === "read" ? { ratio: 0.75, p99: 25 } : { ratio: 0.6, p99: 30 }
      const met = ratio.p50 >= target.ratio && p99.p50 <= target.p99 && named.every((result) => result.beaten)
      lines.push(
        `| sql-${scenario} | ${spread(summarize(http.map((m) => m.rps)), 0)} | ${spread(summarize(raw.map((m) => m.rps)), 0)} | ` +
          `${spread(ratio, 2, true)} | ${fmt(p99.p50, 1)} | ${cpu(http)} / ${cpu(raw)} | ` +
          `≥ ${target.ratio} × raw, p99 ≤ ${target.p99} ms${named.length > 0 ? ", faster than the three servers below" : ""} | ` +
          `${met ? "met" : "not met"} |`
      )
      for (const [index, { name }] of served.entries()) {
        const measures = servedMeasures[index]!
        lines.push(
          `| sql-${scenario}: ${name} | ${spread(summarize(measures.map((m) => m.rps)), 0)} | ${spread(summarize(raw.map((m) => m.rps)), 0)} | ` +
            `${spread(ratioOf(measures), 2, true)} | ${fmt(summarize(measures.map((m) => m.p99)).p50, 1)} | ${cpu(measures)} / ${cpu(raw)} | | |`
        )
      }
      servedTargets.push(...issue23Targets(scenario, servedMeasures[0]!, servedMeasures[1]!, those.map((comparator, index) => ({ comparator, measures: others[index]! }))))
    }
    return [
      `### sql-read / sql-write: ${CONNECTIONS} clients, ${SECONDS} s after ${WARMUP_SECONDS} s warm-up, ${ROUNDS} rounds, each interleaved in ${SLICES} slices (min / median / max)`,
      "",
      "| scenario | Plinth req/s | raw @effect/sql-pg tx/s | ratio | Plinth p99 ms | CPU µs: Plinth per request / raw per tx | target | |",
      "| --- | --- | --- | --- | --- | --- | --- | --- |",
      ...lines,
      "",
      "Other servers under the same load, in the same rounds (ratio: their req/s over the raw loop's tx/s of the same round):",
      "",
      "| scenario | server | req/s | ratio | CPU µs per request | Plinth faster |",
      "| --- | --- | --- | --- | --- | --- |",
      ...comparatorLines,
      "",
      "Issue #23's targets, held to `plinth serve main` with production defaults (per round: its req/s over the other's of the same round; " +
        "CPU: its median µs per request over the other's):",
      "",
      "| scenario | measure | min / median / max | target | |",
      "| --- | --- | --- | --- | --- |",
      ...servedTargets,
      "",
      `\`plinth serve main\` is the built command (\`npm run build\`, dist/src/cli/main.js with the node flags of its \`#!\` line) in a process of its own, ` +
        "NODE_ENV=production, configured from the environment for this database (DATABASE_ADMIN_URL too, so it migrates first), its stdout a pipe " +
        "this bench reads and drops as a log collector would; its CPU µs are its user and system time from /proc/<pid>/stat over the round " +
        `(warm-up included, as for the others), per request. It wrote ${loggedAnswered > 0 ? `${logged.lines()} lines for ${loggedAnswered} requests` : "no lines"}; ` +
        `with LOG_REQUESTS=false, ${quiet.lines()} lines in all. The in-process Plinth rows (the first of each scenario) host the service in this process with LOG_LEVEL=Warn.`,
      "",
      "pgbench is not part of the embedded PostgreSQL package, so the raw baseline is the @effect/sql-pg loop only. " +
        "The load comes from bench/http-load.ts, a small keep-alive client in a process of its own (one per server, kept through the round). " +
        `Each round runs the raw loop for ${SECONDS} s, then the HTTP servers in ${SLICES} slices: in each slice every server takes ` +
        `${fmt(SECONDS / SLICES, 1)} s of load in turn (after ${WARMUP_SECONDS} s of warm-up in its first slice and ${SLICE_WARMUP_SECONDS} s in the others, not measured), ` +
        "the order rotating from slice to slice, and its figures are those of its slices together (p50 and p99 of their merged latencies, to 0.01 ms), " +
        "so that the servers of a round, compared with each other, are measured across the same stretch of time while the machine's speed drifts. " +
        "The first three servers are the ones issue #8 names (bench/sql-fastify.ts, bench/sql-postgraphile.ts). " +
        "The lean hand-written one (bench/sql-handwritten.ts) has Plinth's own optimisations and nothing else: node:http, jose and " +
        "Plinth's driver, the transaction in one round trip, JWTs cached; no framework, SQL guard, limits, logging or error shapes. " +
        "CPU µs (medians): the user and system time of the process running the server (per request, warm-up included) and of the raw loop " +
        "(per transaction), PostgreSQL and the load generator not counted. The server's process is one thread, so at N µs a request " +
        "it answers at most 1,000,000 / N per second; PostgreSQL and the load generator share the other core."
    ].join("\n")
  } finally {
    for (const server of servers) await server.close()
    await stack.close()
  }
}

if (import.meta.main) console.log(await run())
