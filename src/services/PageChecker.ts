/**
 * Page sources parsed for validation off the event loop, by a small pool of worker threads kept
 * for the process. The markdown parser takes time that grows faster than its input on some shapes
 * (nested list markers, runs of emphasis marks, setext underlines), so one request's source parsed
 * in the process would stall every other request: it is parsed in a worker, and a worker still
 * parsing at the deadline is ended and replaced, so such a source costs its own deadline only.
 *
 * Workers start when first needed, one per source parsed at once up to the pool's size: a process
 * that never checks a page starts none, and a worker loads the parser's modules once, not per source.
 * Per-process state with synchronous bookkeeping (as StatementAdmission): every change is made
 * within one callback or one step of one fiber, so no mailbox is needed.
 */
import { Context, Duration, Effect, Layer, Schema, type Scope } from "effect"
import { Worker } from "node:worker_threads"
import type { PageProblem, QueryBlock } from "./PageFormat.ts"

/** What validation needs of a parsed page. */
export interface ParsedForValidation {
  readonly problems: ReadonlyArray<PageProblem>
  /** Each query, with its 1-based place among the page's fenced blocks of the format. */
  readonly queries: ReadonlyArray<{ readonly query: QueryBlock; readonly index: number }>
}

/** A source for a worker, and its answer (PageCheckerWorker.ts). */
export interface ParseRequest {
  readonly id: number
  readonly source: string
}
export interface ParseAnswer {
  readonly id: number
  readonly parsed: ParsedForValidation
}

/** As many sources as the process parses at once are being parsed: try again shortly. */
export class PagesBusy extends Schema.TaggedError<PagesBusy>()("PagesBusy", { message: Schema.String }) {}

/** The source could not be parsed within the deadline or the worker's memory. */
export class PageTooComplex extends Schema.TaggedError<PageTooComplex>()("PageTooComplex", { message: Schema.String }) {}

/** How long a page source may take to parse, from when its worker is given it: a real page takes a small part of it. */
export const PAGE_PARSE_DEADLINE = Duration.seconds(2)
/** How long a worker may take to load (the parser's modules): past it the process is too busy. */
const WORKER_START_DEADLINE = Duration.seconds(30)
/** The worker's heap: a tree of the largest body fits in it many times over. */
const WORKER_HEAP_MB = 256
/** Workers parsing at once in the process, whoever asked: each may hold a core until its deadline. */
export const MAX_PARALLEL_PARSES = 4
/** How long a source waits for a worker when all are parsing: long beside a real page's parse, short beside the deadline. */
export const WORKER_WAIT = Duration.millis(250)
/** Sources waiting for a worker beyond which the next is refused at once (each waits WORKER_WAIT at most anyway). */
const MAX_WAITING = 64

const TOO_MANY = "too many page sources are being checked at once; try again shortly"
const NOT_STARTED = "the page checker did not start in time; try again shortly"
const CLOSED = "the page checker is shutting down; try again shortly"

/** The worker's file beside this one: `.ts` when run from source, `.js` once built. */
const workerUrl = new URL(`./PageCheckerWorker${import.meta.url.endsWith(".ts") ? ".ts" : ".js"}`, import.meta.url)

const tooComplex = () =>
  new PageTooComplex({
    message: "the page source is too complex to check (markdown nested too deeply, or too many emphasis or heading marks); simplify it"
  })
const busy = (message: string) => new PagesBusy({ message })

export interface PageCheckerUsage {
  /** Workers started since the checker was made, replacements included. */
  readonly started: number
  /** Of those, the ones whose thread has ended. */
  readonly exited: number
  /** Workers taking sources now: starting, idle or busy (never more than the pool's size). */
  readonly workers: number
  /** Workers parsing a source now (never more than the pool's size). */
  readonly busy: number
  /** Sources waiting for a worker. */
  readonly waiting: number
}

export interface PageCheckerShape {
  /**
   * Parses `source` in one of the pool's workers; `PageTooComplex` when it takes past the
   * deadline (counted from when the worker is given it) or ends the worker, `PagesBusy` when
   * every worker is parsing and none is free within the wait, or a new one does not start.
   */
  readonly parse: (source: string) => Effect.Effect<ParsedForValidation, PageTooComplex | PagesBusy>
  readonly usage: () => PageCheckerUsage
}

export interface PageCheckerOptions {
  readonly size: number
  readonly parseDeadline: Duration.Duration
  readonly wait: Duration.Duration
  readonly startDeadline?: Duration.Duration | undefined
  readonly maxWaiting?: number | undefined
}

type Answer = Effect.Effect<ParsedForValidation, PageTooComplex | PagesBusy>

interface Job {
  readonly request: ParseRequest
  /** Until answered, or until its caller was interrupted. */
  resume: ((answer: Answer) => void) | undefined
}

interface Pooled {
  readonly worker: Worker
  /** "starting" until the worker has loaded. */
  state: "starting" | "idle" | "busy"
  /** The source it parses; while starting, the one it was started for. */
  job: Job | undefined
  /** The start deadline, then each parse's. */
  timer: ReturnType<typeof setTimeout> | undefined
}

interface Waiter {
  readonly job: Job
  timer: ReturnType<typeof setTimeout> | undefined
}

/** A pool of page-parsing workers, ended with the scope. */
export const makePageChecker = (options: PageCheckerOptions): Effect.Effect<PageCheckerShape, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { size } = options
    const parseDeadlineMs = Duration.toMillis(options.parseDeadline)
    const waitMs = Duration.toMillis(options.wait)
    const startDeadlineMs = Duration.toMillis(options.startDeadline ?? WORKER_START_DEADLINE)
    const maxWaiting = options.maxWaiting ?? MAX_WAITING
    /** Workers taking sources (starting, idle or busy): never more than `size`. */
    const pool = new Set<Pooled>()
    /** Every thread not yet ended, in the pool or ended by it: closing waits for them all. */
    const threads = new Set<Worker>()
    /** Sources waiting for a worker, in arrival order. */
    const waiting = new Set<Waiter>()
    let started = 0
    let exited = 0
    let lastId = 0
    let closed = false

    /** Called last, once the books are right: the caller's fiber may run on at once. */
    const answer = (job: Job, effect: Answer) => {
      const resume = job.resume
      job.resume = undefined
      resume?.(effect)
    }

    const run = (pooled: Pooled, job: Job) => {
      pooled.state = "busy"
      pooled.job = job
      pooled.timer = setTimeout(() => fault(pooled), parseDeadlineMs)
      pooled.worker.postMessage(job.request)
    }

    /** The longest-waiting source, out of the queue. */
    const nextWaiting = (): Job | undefined => {
      for (const waiter of waiting) {
        waiting.delete(waiter)
        clearTimeout(waiter.timer)
        return waiter.job
      }
      return undefined
    }

    /** A worker done with its source takes the longest-waiting one, or waits idle. */
    const free = (pooled: Pooled) => {
      clearTimeout(pooled.timer)
      pooled.job = undefined
      const next = nextWaiting()
      if (next !== undefined) return run(pooled, next)
      pooled.state = "idle"
    }

    /**
     * Ends a worker past its deadline, or that failed or exited: its caller is answered, and a
     * worker that had loaded is replaced at once, for the longest-waiting source if any (one that
     * could not load is not replaced, lest it loop).
     */
    const fault = (pooled: Pooled) => {
      if (!pool.delete(pooled)) return
      clearTimeout(pooled.timer)
      void pooled.worker.terminate()
      const loaded = pooled.state !== "starting"
      if (loaded && !closed) start(nextWaiting())
      if (pooled.job !== undefined) answer(pooled.job, Effect.fail(loaded ? tooComplex() : busy(NOT_STARTED)))
    }

    const start = (job: Job | undefined) => {
      let worker: Worker
      try {
        worker = new Worker(workerUrl, { resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB } })
      } catch {
        // No thread to be had (the process at its limits): not the source's doing.
        if (job !== undefined) answer(job, Effect.fail(busy(NOT_STARTED)))
        return
      }
      started++
      // The pool never keeps the process alive by itself: a parse in progress has its deadline's timer.
      worker.unref()
      threads.add(worker)
      const pooled: Pooled = { worker, state: "starting", job, timer: undefined }
      pool.add(pooled)
      pooled.timer = setTimeout(() => fault(pooled), startDeadlineMs)
      worker.on("message", (message: "ready" | ParseAnswer) => {
        if (!pool.has(pooled)) return
        if (message === "ready") {
          clearTimeout(pooled.timer)
          const first = pooled.job
          // The deadline counts the parse alone, from here: loading the worker is not the source's doing.
          if (first?.resume !== undefined) run(pooled, first)
          else free(pooled)
          return
        }
        const job = pooled.job
        if (pooled.state !== "busy" || job === undefined || job.request.id !== message.id) return
        free(pooled)
        answer(job, Effect.succeed(message.parsed))
      })
      worker.once("error", () => fault(pooled))
      worker.once("exit", () => {
        exited++
        threads.delete(worker)
        fault(pooled)
      })
    }

    const parse = (source: string): Answer =>
      Effect.callback<ParsedForValidation, PageTooComplex | PagesBusy>((resume) => {
        if (closed) return resume(Effect.fail(busy(CLOSED)))
        const job: Job = { request: { id: ++lastId, source }, resume }
        const leave = Effect.sync(() => {
          job.resume = undefined
        })
        for (const pooled of pool) {
          if (pooled.state === "idle") {
            run(pooled, job)
            return leave
          }
        }
        // A worker loading for nobody (a replacement, or its caller has gone) is as good as idle.
        for (const pooled of pool) {
          if (pooled.state === "starting" && pooled.job?.resume === undefined) {
            pooled.job = job
            return leave
          }
        }
        if (pool.size < size) {
          start(job)
          return leave
        }
        if (waiting.size >= maxWaiting) return resume(Effect.fail(busy(TOO_MANY)))
        const waiter: Waiter = { job, timer: undefined }
        waiter.timer = setTimeout(() => {
          waiting.delete(waiter)
          answer(job, Effect.fail(busy(TOO_MANY)))
        }, waitMs)
        waiting.add(waiter)
        // Interrupted while waiting: out of the queue. Once a worker has its source, the parse
        // ends by itself (or at its deadline) and nobody is told.
        return Effect.sync(() => {
          job.resume = undefined
          if (waiting.delete(waiter)) clearTimeout(waiter.timer)
        })
      })

    yield* Effect.addFinalizer(() =>
      Effect.promise(() => {
        closed = true
        const jobs: Array<Job> = []
        for (const waiter of waiting) {
          clearTimeout(waiter.timer)
          jobs.push(waiter.job)
        }
        waiting.clear()
        for (const pooled of pool) {
          clearTimeout(pooled.timer)
          if (pooled.job !== undefined) jobs.push(pooled.job)
        }
        pool.clear()
        const ended = Promise.all([...threads].map((worker) => worker.terminate()))
        for (const job of jobs) answer(job, Effect.fail(busy(CLOSED)))
        return ended
      })
    )

    return {
      parse,
      usage: () => ({
        started,
        exited,
        workers: pool.size,
        busy: [...pool].filter((pooled) => pooled.state === "busy").length,
        waiting: waiting.size
      })
    }
  })

export class PageChecker extends Context.Service<PageChecker, PageCheckerShape>()("plinth/PageChecker") {
  /** The process's pool: its workers end when the layer's scope closes. */
  static readonly layer: Layer.Layer<PageChecker> = Layer.effect(
    PageChecker,
    makePageChecker({ size: MAX_PARALLEL_PARSES, parseDeadline: PAGE_PARSE_DEADLINE, wait: WORKER_WAIT })
  )
}
