/**
 * The page parser run in a worker thread of PageChecker.ts's pool: says "ready" once loaded, then
 * answers each source it is given, one at a time, with what validation needs (its problems, and
 * its queries with their place among the fenced blocks).
 */
import { parentPort } from "node:worker_threads"
import { parsePage } from "./PageFormat.ts"
import type { ParseAnswer, ParsedForValidation, ParseRequest } from "./PageChecker.ts"

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

parentPort?.on("message", (request: ParseRequest) => {
  const answer: ParseAnswer = { id: request.id, parsed: parse(request.source) }
  parentPort?.postMessage(answer)
})
parentPort?.postMessage("ready")
