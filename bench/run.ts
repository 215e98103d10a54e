/**
 * `npm run bench`: each scenario starts its own embedded PostgreSQL and Plinth, measures beside a
 * raw baseline of the same run, and prints a table; the report goes to docs/benchmarks.md too.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import { run as events } from "./events.ts"
import { run as introspect } from "./introspect.ts"
import { run as sql } from "./sql.ts"

const sections: Array<string> = [
  "# Benchmarks",
  "",
  `Measured by \`npm run bench\` on ${new Date().toISOString().slice(0, 10)}: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? "unknown"}), ` +
  `${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, PostgreSQL 18 (embedded). Database, load generator and Plinth share ` +
  "the machine. Targets not met are shown as such.",
  ""
]
for (const scenario of [sql, events, introspect]) {
  const table = await scenario()
  console.log(`${table}\n`)
  sections.push(table, "")
}
mkdirSync("docs", { recursive: true })
writeFileSync("docs/benchmarks.md", sections.join("\n"))
console.log("written to docs/benchmarks.md")
