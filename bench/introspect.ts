/**
 * `introspect`: POST / with 200 managed tables, warm (cached) and cold (right after a catalog
 * change), as owner and as member. Beside it, the raw baseline: the same two SQL functions called
 * straight through the driver, with no HTTP and no cache, in the same run.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { withDatabase } from "../src/layers/Database.ts"
import { spread, summarize } from "./stats.ts"
import { type BenchStack, signIn, startBenchStack } from "./support.ts"

const TABLES = 200
const WARM_SAMPLES = 50
const COLD_SAMPLES = 10
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)

type Summary = ReturnType<typeof summarize>

const columns = (i: number) => [
  { name: "name", type: "text", required: true },
  { name: "amount", type: "currency" },
  { name: "status", type: "choice", options: [{ value: "open", label: "Open", color: null }, { value: "done", label: "Done", color: "#0a0" }] },
  ...(i > 0 ? [{ name: "parent", type: "reference", references: `t${String(i - 1).padStart(3, "0")}` }] : [])
]

const introspect = async (stack: BenchStack, token: string) => {
  const started = performance.now()
  const response = await fetch(`${stack.baseUrl}/`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: "{}"
  })
  await response.arrayBuffer()
  if (response.status !== 200) throw new Error(`POST / answered ${response.status}`)
  return performance.now() - started
}

/** A catalog change that touches nothing the bench reads: the caches must drop everything. */
const touchCatalog = (stack: BenchStack) => stack.admin((sql) => sql`SELECT pg_notify('plinth_catalog', 'bench')`)

const fmt = (ms: number) => ms.toFixed(1)

export const run = async () => {
  const stack = await startBenchStack()
  try {
    for (let i = 0; i < TABLES; i++) {
      const name = `t${String(i).padStart(3, "0")}`
      await stack.admin((sql) => sql`SELECT sys.create_table(${name}, ${JSON.stringify(columns(i))}::jsonb)`)
    }
    await stack.admin((sql) => sql`ANALYZE`)
    const tokens = { owner: await signIn(stack, "owner@bench.test", "owner"), member: await signIn(stack, "member@bench.test", "member") }
    const rows: Array<string> = []
    const samples = { owner: { warm: new Array<Summary>(), cold: new Array<Summary>() }, member: { warm: new Array<Summary>(), cold: new Array<Summary>() } }
    for (let round = 0; round < ROUNDS; round++) {
      for (const [role, token] of Object.entries(tokens) as Array<[keyof typeof tokens, string]>) {
        await introspect(stack, token)
        const warm: Array<number> = []
        for (let i = 0; i < WARM_SAMPLES; i++) warm.push(await introspect(stack, token))
        const cold: Array<number> = []
        for (let i = 0; i < COLD_SAMPLES; i++) {
          await touchCatalog(stack)
          await new Promise((resolve) => setTimeout(resolve, 20)) // let the notification arrive
          cold.push(await introspect(stack, token))
        }
        samples[role].warm.push(summarize(warm))
        samples[role].cold.push(summarize(cold))
      }
    }
    for (const [role, cases] of Object.entries(samples)) {
      for (const [name, limit] of [["warm", 100], ["cold", 500]] as const) {
        const p50 = summarize(cases[name].map((summary) => summary.p50))
        const p99 = summarize(cases[name].map((summary) => summary.p99))
        rows.push(`| ${role} | ${name} | ${spread(p50, 1)} | ${fmt(p99.p50)} | ${fmt(Math.max(...cases[name].map((summary) => summary.max)))} | ≤ ${limit} | ${p50.p50 <= limit ? "met" : "not met"} |`)
      }
    }
    // Raw baseline: the two SQL functions as the owner role, straight through the driver.
    const raw: Array<number> = []
    await Effect.runPromise(withDatabase(stack.adminUrl, Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      for (let i = 0; i < COLD_SAMPLES; i++) {
        const started = performance.now()
        yield* sql.withTransaction(Effect.andThen(
          sql`SELECT set_config('role', 'owner', true)`,
          sql`SELECT sys.introspect() AS a, sys.table_stats() AS b`
        ))
        raw.push(performance.now() - started)
      }
    })))
    const r = summarize(raw)
    rows.push(`| owner | raw SQL (no HTTP, no cache) | ${fmt(r.p50)} | ${fmt(r.p99)} | ${fmt(r.max)} | | |`)
    return [
      `### introspect: POST / with ${TABLES} managed tables, ${ROUNDS} interleaved rounds (ms)`,
      "",
      "| role | case | p50 (rounds: min / median / max) | p99 (median of rounds) | max | target (median p50) | |",
      "| --- | --- | --- | --- | --- | --- | --- |",
      ...rows,
      "",
      `Each round: ${WARM_SAMPLES} warm requests (the schema cached) and ${COLD_SAMPLES} cold ones (each right after a catalog change) per role, owner then member.`
    ].join("\n")
  } finally {
    await stack.close()
  }
}

if (import.meta.main) console.log(await run())
