/**
 * `npm run bench`: each scenario starts its own embedded PostgreSQL and Plinth, measures, and
 * prints a table. More scenarios (and docs/benchmarks.md) arrive with the Performance issue.
 */
import { run as events } from "./events.ts"
import { run as introspect } from "./introspect.ts"
import { run as sql } from "./sql.ts"

console.log(`machine: ${(await import("node:os")).cpus().length} cores, node ${process.version}\n`)
console.log(await introspect())
console.log("")
console.log(await events())
console.log("")
console.log(await sql())
