/**
 * The page parser run in a worker thread for PageParsing.ts: the source in (workerData), what
 * validation needs out (its problems, and its queries with their place among the fenced blocks).
 */
import { parentPort, workerData } from "node:worker_threads"
import { parsePage } from "./PageFormat.ts"
import type { ParsedForValidation } from "./PageParsing.ts"

const page = parsePage(workerData as string)
let index = 0
const queries: Array<ParsedForValidation["queries"][number]> = []
for (const block of page.blocks) {
  if (block.kind === "markdown") continue
  index++
  if (block.kind === "query") queries.push({ query: block, index })
}
const parsed: ParsedForValidation = { problems: page.problems, queries }
parentPort?.postMessage(parsed)
