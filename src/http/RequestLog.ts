/**
 * The request log: one line per request (method, path without its query string, status, duration,
 * request id). Every request writes one, so the line is built by hand, in the shape Effect's JSON
 * logger gives it in production and its readable shape otherwise, and lines are written in batches
 * (one write per BATCH_MS, or sooner once BATCH_CHARS are waiting), flushed when the process
 * stops. A program that installs no writer (tests, the bench's in-process services) logs request
 * lines through Effect's logger, as every other line.
 */
import { Context, Effect, Layer } from "effect"
import { maskEmails } from "../services/EmailMask.ts"

/** Logs one request's line; the request waits for nothing but the line's place in the batch. */
export interface RequestLogger {
  readonly log: (method: string, path: string, status: number, duration: string, requestId: string) => Effect.Effect<void>
}

/** Through Effect's logger, annotated with the line's fields: what a program gets that installs no writer. */
export const viaEffectLogger: RequestLogger = {
  log: (method, path, status, duration, requestId) =>
    Effect.annotateLogs(Effect.logInfo(`${method} ${path} ${status} ${duration}`), { method, path, status, duration, requestId })
}

/** No request lines (LOG_REQUESTS=false, or a minimum log level above Info). */
export const noRequestLog: RequestLogger = { log: () => Effect.void }

/** Where the HTTP servers send their request lines; read once, when a server is built. */
export const RequestLog = Context.Reference<RequestLogger>("plinth/RequestLog", { defaultValue: () => viaEffectLogger })

/** `LOG_REQUESTS`: when off, the servers built under this layer write no request lines. */
export const requestLogSetting = (enabled: boolean): Layer.Layer<never> => enabled ? Layer.empty : Layer.succeed(RequestLog, noRequestLog)

/** Where batches go: a stream such as `process.stdout`. */
export interface LineSink {
  readonly write: (chunk: string) => unknown
}

export interface BatchedLines {
  readonly add: (line: string) => void
  /** Writes what is waiting now (at shutdown and at exit). */
  readonly flush: () => void
}

/** A batch is written once it holds this many characters, without waiting for its time. */
export const BATCH_CHARS = 32 * 1024

/**
 * How long a batch collects lines after its first: a write per event-loop turn was still one system
 * call per request at low concurrency (docs/performance-notes.md); a line is seen this much later.
 */
export const BATCH_MS = 20

/** Lines collected for BATCH_MS after the first and written together (or at BATCH_CHARS). */
export const batchedLines = (sink: LineSink): BatchedLines => {
  let pending = ""
  let scheduled: ReturnType<typeof setTimeout> | undefined
  const flush = () => {
    if (scheduled !== undefined) {
      clearTimeout(scheduled)
      scheduled = undefined
    }
    if (pending === "") return
    const chunk = pending
    pending = ""
    sink.write(chunk)
  }
  return {
    add: (line) => {
      pending += line
      if (pending.length >= BATCH_CHARS) flush()
      else if (scheduled === undefined) scheduled = setTimeout(flush, BATCH_MS)
    },
    flush
  }
}

/** What JSON must escape in a string (lone surrogates included, as `JSON.stringify` does). */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/

/** `text` as a JSON string; most values need no escaping, and testing for it is cheaper than `JSON.stringify`. */
const quoted = (text: string) => NEEDS_ESCAPE.test(text) ? JSON.stringify(text) : `"${text}"`

let lastMillis = Number.NaN
let lastIso = ""
/** `toISOString` of the time `millis`, computed once per millisecond (many lines share one under load). */
export const isoTime = (millis: number): string => {
  if (millis !== lastMillis) {
    lastMillis = millis
    lastIso = new Date(millis).toISOString()
  }
  return lastIso
}

/**
 * The line as `Logger.formatJson` writes it for `Effect.logInfo` with the line's annotations (same
 * fields, order and level), email addresses in the path masked as the production logger masks them.
 */
export const jsonLine = (method: string, path: string, status: number, duration: string, requestId: string, fiberId: number, millis: number): string => {
  const shownPath = quoted(maskEmails(path))
  const shownMethod = quoted(method)
  const shownDuration = quoted(duration)
  const message = `${shownMethod.slice(0, -1)} ${shownPath.slice(1, -1)} ${status} ${shownDuration.slice(1)}`
  return `{"message":${message},"level":"INFO","timestamp":"${isoTime(millis)}",` +
    `"annotations":{"method":${shownMethod},"path":${shownPath},"status":${status},"duration":${shownDuration},` +
    `"requestId":${quoted(requestId)}},"spans":{},"fiberId":"#${fiberId}"}\n`
}

/** The line as the development logger writes an Info line: time of day, level, message. */
export const readableLine = (method: string, path: string, status: number, duration: string, millis: number): string =>
  `${isoTime(millis).slice(11, 23)} INFO  ${method} ${path} ${status} ${duration}\n`

/** JSON lines (production), in batches. */
export const jsonRequestLog = (lines: BatchedLines): RequestLogger => ({
  log: (method, path, status, duration, requestId) =>
    Effect.withFiber((fiber) => {
      lines.add(jsonLine(method, path, status, duration, requestId, fiber.id, Date.now()))
      return Effect.void
    })
})

/** Readable lines (development), in batches. */
export const readableRequestLog = (lines: BatchedLines): RequestLogger => ({
  log: (method, path, status, duration) =>
    Effect.sync(() => lines.add(readableLine(method, path, status, duration, Date.now())))
})
