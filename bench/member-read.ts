/**
 * `member-read`: members reading their own rows of a managed table through its read view (issue
 * #22): 1,000,000 rows of 10,000 members (100 each), a reference to a small table that the view
 * joins for `<column>_display`, the default `own` policy on created_by, 32 concurrent clients from
 * a second process. Beside it, the raw baseline of the same run: the identical transaction (BEGIN;
 * the settings statement; the statement; COMMIT) straight through @effect/sql-pg by 32 fibers.
 * Run alone: `npm run bench -- member-read`.
 */
import { PgClient } from "@effect/sql-pg"
import { Duration, Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { makeAccessTokens } from "../src/services/AccessTokens.ts"
import { makeJsonColumnTypes } from "../src/services/JsonColumnTypes.ts"
import { percentile, spread, summarize } from "./stats.ts"
import { BENCH_JWT_SECRET, type BenchStack, rawClosedLoop, rawTransaction, runLoad, startBenchStack } from "./support.ts"

const ROWS = 1_000_000
const USERS = 10_000
const CATEGORIES = 100
const CONNECTIONS = 32
const SECONDS = Number(process.env.BENCH_SECONDS ?? 15)
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 3)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const TARGET_P99_MS = 25

/** A list screen: the member's latest rows, with the referenced row's display text. */
export const STATEMENT = "SELECT id, title, amount, category, category_display, created_at FROM items_v ORDER BY created_at DESC LIMIT 20"

interface User {
  readonly id: string
  readonly token: string
}

interface Measure {
  readonly rps: number
  readonly p50: number
  readonly p99: number
}

/** The tables through sys.create_table (so they have what every managed table has), the rows by the administrator. */
export const setup = async (stack: BenchStack): Promise<ReadonlyArray<User>> => {
  await stack.admin((sql) => sql`SELECT sys.create_table('categories', ${JSON.stringify([{ name: "name", type: "text", required: true }])}::jsonb)`)
  await stack.admin((sql) => sql`SELECT sys.create_table('items', ${JSON.stringify([
    { name: "title", type: "text", required: true },
    { name: "amount", type: "currency" },
    { name: "category", type: "reference", references: "categories" }
  ])}::jsonb)`)
  const ids = await stack.admin((sql) => sql<{ id: string }>`
    INSERT INTO sys.users (email, role) SELECT 'user' || n || '@bench.test', 'member' FROM generate_series(1, ${USERS}) AS n
    RETURNING id`)
  await stack.admin((sql) => sql`INSERT INTO public.categories (name) SELECT 'category ' || n FROM generate_series(1, ${CATEGORIES}) AS n`)
  // Members read every category (the view's display column), and only their own items (the default).
  await stack.admin((sql) => sql`SELECT sys.set_table_permissions('categories', 'member', true, false, false)`)
  // Rows of all users interleaved, as they would be written over time.
  await stack.admin((sql) => sql`
    WITH u AS (SELECT array_agg(id ORDER BY id) AS ids FROM sys.users WHERE role = 'member'),
      c AS (SELECT array_agg(id ORDER BY name) AS ids FROM public.categories)
    INSERT INTO public.items (title, amount, category, created_by, created_at)
    SELECT 'item ' || n, (n % 1000) / 10.0, c.ids[1 + n % ${CATEGORIES}], u.ids[1 + n % ${USERS}], now() - make_interval(secs => ${ROWS} - n)
    FROM generate_series(1, ${ROWS}) AS n, u, c`)
  await stack.admin((sql) => sql`VACUUM ANALYZE public.items`)
  await stack.admin((sql) => sql`ANALYZE public.categories`)
  const tokens = makeAccessTokens({ secret: Redacted.make(BENCH_JWT_SECRET), ttl: Duration.hours(2) })
  return Effect.runPromise(Effect.forEach(ids, ({ id }, n) =>
    Effect.map(tokens.issue({ userId: id, role: "member", email: `user${n + 1}@bench.test` }), (token) => ({ id, token }))))
}

const httpRound = async (stack: BenchStack, users: ReadonlyArray<User>): Promise<Measure> => {
  const body = JSON.stringify({ sql: STATEMENT })
  const result = await runLoad({
    url: `${stack.baseUrl}/sql`,
    connections: CONNECTIONS,
    seconds: SECONDS,
    warmupSeconds: WARMUP_SECONDS,
    requests: users.map((user) => ({ token: user.token, body }))
  })
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`load had ${result.non2xx} non-2xx and ${result.errors} errors`)
  return result
}

/** The same transaction as a request's, 32 fibers at a time, for the same duration. */
const rawRound = (stack: BenchStack, users: ReadonlyArray<User>) =>
  Effect.runPromise(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const oneRequest = Effect.suspend(() =>
      rawTransaction(sql, { role: "member", userId: users[Math.floor(Math.random() * users.length)]!.id }, STATEMENT))
    const { samples, seconds } = yield* rawClosedLoop(oneRequest, { connections: CONNECTIONS, warmupSeconds: WARMUP_SECONDS, seconds: SECONDS })
    return { rps: samples.length / seconds, p50: percentile(samples, 50), p99: percentile(samples, 99) } satisfies Measure
  }).pipe(Effect.provide(PgClient.layer({
    url: Redacted.make(stack.mainUrl),
    maxConnections: CONNECTIONS,
    types: makeJsonColumnTypes(),
    idleTimeout: Duration.seconds(30)
  }))))

export const run = async () => {
  const stack = await startBenchStack()
  try {
    const setupStarted = performance.now()
    const users = await setup(stack)
    const setupSeconds = (performance.now() - setupStarted) / 1000
    const http: Array<Measure> = []
    const raw: Array<Measure> = []
    for (let round = 0; round < ROUNDS; round++) {
      http.push(await httpRound(stack, users))
      raw.push(await rawRound(stack, users))
    }
    const p99 = summarize(http.map((m) => m.p99))
    const ratio = summarize(http.map((m, i) => m.rps / raw[i]!.rps))
    return [
      `### member-read: ${CONNECTIONS} clients, ${SECONDS} s after ${WARMUP_SECONDS} s warm-up, ${ROUNDS} interleaved rounds (min / median / max)`,
      "",
      "| scenario | Plinth req/s | raw @effect/sql-pg tx/s | ratio | Plinth p50 ms | Plinth p99 ms | raw p99 ms | target | |",
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
      `| member-read | ${spread(summarize(http.map((m) => m.rps)), 0)} | ${spread(summarize(raw.map((m) => m.rps)), 0)} | ${spread(ratio, 2)} | ` +
        `${summarize(http.map((m) => m.p50)).p50.toFixed(1)} | ${spread(p99, 1, true)} | ${summarize(raw.map((m) => m.p99)).p50.toFixed(1)} | ` +
        `p99 ≤ ${TARGET_P99_MS} ms | ${p99.p50 <= TARGET_P99_MS ? "met" : "not met"} |`,
      "",
      `A managed table of ${ROWS.toLocaleString("en")} rows by ${USERS.toLocaleString("en")} members (100 each, interleaved) with a reference to a ` +
        `table of ${CATEGORIES} rows; each request, as a random member: \`${STATEMENT}\` (the default \`own\` policy on created_by, ` +
        `the view's join for category_display, categories readable by all members). Setup (tables, rows, indexes, VACUUM ANALYZE) took ${setupSeconds.toFixed(0)} s.`
    ].join("\n")
  } finally {
    await stack.close()
  }
}

if (import.meta.main) console.log(await run())
