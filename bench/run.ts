/**
 * `npm run bench`: each scenario runs in a fresh process of its own (so memory figures are not
 * another scenario's leftovers), starts its own embedded PostgreSQL and Plinth, measures beside a
 * raw baseline of the same run, and prints a table; the report goes to docs/benchmarks.md.
 */
import { spawnSync } from "node:child_process"
import { mkdirSync, writeFileSync } from "node:fs"
import * as os from "node:os"

const SCENARIOS = ["bench/sql.ts", "bench/events.ts", "bench/chat.ts", "bench/introspect.ts", "bench/startup.ts"]

const sections: Array<string> = [
  "# Benchmarks",
  "",
  `Measured by \`npm run bench\` on ${new Date().toISOString().slice(0, 10)}: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? "unknown"}), ` +
  `${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version} (${process.execArgv.join(" ")}), PostgreSQL 18 (embedded). Database, load generator and Plinth share ` +
  "the machine; each scenario runs in a fresh process. Targets not met are shown as such.",
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
mkdirSync("docs", { recursive: true })
writeFileSync("docs/benchmarks.md", sections.join("\n"))
console.log("written to docs/benchmarks.md")
