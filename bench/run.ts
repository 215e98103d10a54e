/**
 * `npm run bench`: each scenario runs in a fresh process of its own (so memory figures are not
 * another scenario's leftovers), starts its own embedded PostgreSQL and Plinth, measures beside a
 * raw baseline of the same run, and prints a table; the report goes to docs/benchmarks.md.
 * `npm run bench -- member-read sql` runs only the scenarios named (by file name) and prints them,
 * leaving docs/benchmarks.md as it is (a partial run is no report).
 */
import { spawnSync } from "node:child_process"
import { mkdirSync, writeFileSync } from "node:fs"
import * as os from "node:os"

const ALL_SCENARIOS = ["bench/sql.ts", "bench/member-read.ts", "bench/events.ts", "bench/chat.ts", "bench/introspect.ts", "bench/startup.ts"]
const chosen = process.argv.slice(2)
const unknown = chosen.filter((name) => !ALL_SCENARIOS.includes(`bench/${name}.ts`))
if (unknown.length > 0) {
  console.error(`unknown scenario ${unknown.join(", ")}; the scenarios are ${ALL_SCENARIOS.map((file) => file.slice(6, -3)).join(", ")}`)
  process.exit(2)
}
const SCENARIOS = chosen.length === 0 ? ALL_SCENARIOS : ALL_SCENARIOS.filter((file) => chosen.includes(file.slice(6, -3)))

const sections: Array<string> = [
  "# Benchmarks",
  "",
  `Measured by \`npm run bench\` on ${new Date().toISOString().slice(0, 10)}: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? "unknown"}), ` +
  `${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version} (${process.execArgv.join(" ")}), PostgreSQL 18 (embedded). Database, load generator and Plinth share ` +
  "the machine; each scenario runs in a fresh process. Targets not met are shown as such.",
  "",
  "`npm run bench -- sql` runs sql-read and sql-write alone and prints them (only a full run writes this file); it runs `npm run build` first, " +
  "since its `plinth serve main` rows measure the built code. `BENCH_SECONDS`, `BENCH_WARMUP_SECONDS` and `BENCH_ROUNDS` (15, 3, 3) shorten a trial " +
  "run, with `BENCH_SLICES` (5, the slices of a round of sql's HTTP servers), e.g. " +
  "`BENCH_SECONDS=3 BENCH_WARMUP_SECONDS=1 BENCH_ROUNDS=1 BENCH_SLICES=3 npm run bench -- sql`; its figures mean nothing. " +
  "`./node_modules/.bin/node bench/request-log.ts` measures the request log's own cost per line (docs/performance-notes.md).",
  ""
]
for (const scenario of SCENARIOS) {
  // The same Node flags as this process (`npm run bench`: those Plinth runs with, package.json).
  // PostGraphile (a comparator of bench/sql.ts) in production mode, as it is deployed; set, so it does not warn that it guessed.
  const run = spawnSync(process.execPath, [...process.execArgv, scenario], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
    maxBuffer: 16 * 1024 * 1024,
    env: { ...process.env, GRAPHILE_ENV: "production" }
  })
  const table = run.status === 0 ? run.stdout.trim() : `### ${scenario}\n\nfailed (exit ${run.status})`
  console.log(`${table}\n`)
  sections.push(table, "")
}
if (chosen.length === 0) {
  mkdirSync("docs", { recursive: true })
  writeFileSync("docs/benchmarks.md", sections.join("\n"))
  console.log("written to docs/benchmarks.md")
}
