/**
 * The page parser run in a worker thread for PageParsing.ts: says "ready" once loaded, then takes
 * one source and answers what validation needs (its problems, and its queries with their place
 * among the fenced blocks).
 */
import { parentPort } from "node:worker_threads"
import { parsePage } from "./PageFormat.ts"
import type { ParsedForValidation } from "./PageParsing.ts"

const parse = (source: string): ParsedForValidation => {
  const page = parsePage(source)
  let index = 0
  const queries: Array<ParsedForValidation["queries"][number]> = []
  for (const block of page.blocks) {
    if (block.kind === "markdown") continue
    index++
    if (block.kind === "query") queries.push({ query: block, index })
  }
  return { problems: page.problems, queries }
}

parentPort?.once("message", (source: string) => parentPort?.postMessage(parse(source)))
parentPort?.postMessage("ready")
