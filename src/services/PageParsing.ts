/**
 * A page source parsed for validation off the event loop. The markdown parser takes time that
 * grows faster than its input on some shapes (nested list markers, runs of emphasis marks, setext
 * underlines), so one request's source parsed in the process would stall every other request:
 * it runs in a worker thread of its own, ended at a deadline.
 */
import { Duration, Effect, Schema } from "effect"
import { Worker } from "node:worker_threads"
import type { PageProblem, QueryBlock } from "./PageFormat.ts"

/** What validation needs of a parsed page. */
export interface ParsedForValidation {
  readonly problems: ReadonlyArray<PageProblem>
  /** Each query, with its 1-based place among the page's fenced blocks of the format. */
  readonly queries: ReadonlyArray<{ readonly query: QueryBlock; readonly index: number }>
}

/** As many sources as the process parses at once are being parsed: try again shortly. */
export class PagesBusy extends Schema.TaggedError<PagesBusy>()("PagesBusy", { message: Schema.String }) {}

/** The source could not be parsed within the deadline or the worker's memory. */
export class PageTooComplex extends Schema.TaggedError<PageTooComplex>()("PageTooComplex", { message: Schema.String }) {}

/** How long a page source may take to parse, once the worker has loaded: a real page takes a small part of it. */
export const PAGE_PARSE_DEADLINE = Duration.seconds(2)
/** How long a worker may take to load (the parser's modules): past it the process is too busy. */
const WORKER_START_DEADLINE = Duration.seconds(30)
/** The worker's heap: a tree of the largest body fits in it many times over. */
const WORKER_HEAP_MB = 256
/** Workers parsing at once in the process, whoever asked: each may hold a core until its deadline. */
export const MAX_PARALLEL_PARSES = 4
let running = 0

/** The worker's file beside this one: `.ts` when run from source, `.js` once built. */
const workerUrl = new URL(`./PageParsingWorker${import.meta.url.endsWith(".ts") ? ".ts" : ".js"}`, import.meta.url)

const tooComplex = () =>
  new PageTooComplex({
    message: "the page source is too complex to check (markdown nested too deeply, or too many emphasis or heading marks); simplify it"
  })

/**
 * Parses `source` in a fresh worker; `PageTooComplex` when it takes past the deadline or fails,
 * `PagesBusy` when MAX_PARALLEL_PARSES are running.
 */
export const parseForValidation = (source: string): Effect.Effect<ParsedForValidation, PageTooComplex | PagesBusy> =>
  Effect.callback<ParsedForValidation, PageTooComplex | PagesBusy>((resume) => {
    if (running >= MAX_PARALLEL_PARSES) {
      resume(Effect.fail(new PagesBusy({ message: "too many page sources are being checked at once; try again shortly" })))
      return
    }
    running++
    const worker = new Worker(workerUrl, { resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB } })
    let settled = false
    const end = () => {
      if (settled) return false
      settled = true
      running--
      clearTimeout(timer)
      void worker.terminate()
      return true
    }
    const settle = (effect: Effect.Effect<ParsedForValidation, PageTooComplex | PagesBusy>) => {
      if (end()) resume(effect)
    }
    // The deadline counts the parse alone, from the worker's "ready": loading it is not the source's doing.
    let timer = setTimeout(
      () => settle(Effect.fail(new PagesBusy({ message: "the page checker did not start in time; try again shortly" }))),
      Duration.toMillis(WORKER_START_DEADLINE)
    )
    worker.once("message", () => {
      clearTimeout(timer)
      timer = setTimeout(() => settle(Effect.fail(tooComplex())), Duration.toMillis(PAGE_PARSE_DEADLINE))
      worker.once("message", (parsed: ParsedForValidation) => settle(Effect.succeed(parsed)))
      worker.postMessage(source)
    })
    worker.once("error", () => settle(Effect.fail(tooComplex())))
    worker.once("exit", () => settle(Effect.fail(tooComplex())))
    return Effect.sync(() => void end())
  })
