/**
 * Logging through Effect's logger: JSON lines in production (for collectors), one short readable
 * line per entry in development; `LOG_LEVEL` sets the minimum level. Nothing logs secrets: request
 * lines carry the path without its query string, and configuration values stay `Redacted`. In
 * production every email address in a line is masked (`j***@example.com`), whichever code logged it.
 */
import { Cause, Effect, Layer, Logger, LogLevel, References } from "effect"
import { inspect } from "node:util"
import { batchedLines, jsonRequestLog, type LineSink, noRequestLog, readableRequestLog, RequestLog } from "../http/RequestLog.ts"
import { maskEmails } from "../services/EmailMask.ts"
import { PlinthConfig } from "../services/PlinthConfig.ts"

const text = (message: unknown): string =>
  (Array.isArray(message) ? message : [message]).map((part) => (typeof part === "string" ? part : inspect(part))).join(" ")

const readableLogger = Logger.make(({ cause, date, logLevel, message }) => {
  const time = date.toISOString().slice(11, 23)
  const details = cause.reasons.length > 0 ? `\n${Cause.pretty(cause)}` : ""
  process.stderr.write(`${time} ${logLevel.toUpperCase().padEnd(5)} ${text(message)}${details}\n`)
})

/** JSON lines, as `Logger.consoleJson` writes them, with email addresses masked. */
const productionLogger = Logger.withConsoleLog(Logger.map(Logger.formatJson, maskEmails))

/**
 * Request lines, built by hand and written in batches to where the logger above writes (stdout in
 * production, stderr otherwise); what waits is written when the layer closes (after the servers
 * have answered their last requests) and, should the process end another way, at its exit.
 */
export const requestLogTo = (streams: { readonly stdout: LineSink; readonly stderr: LineSink }) =>
  Layer.effect(RequestLog, Effect.gen(function*() {
    const config = yield* PlinthConfig
    if (!config.logRequests || LogLevel.isGreaterThan(config.logLevel, "Info")) return noRequestLog
    const lines = batchedLines(config.isProduction ? streams.stdout : streams.stderr)
    process.on("exit", lines.flush)
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        lines.flush()
        process.off("exit", lines.flush)
      })
    )
    return config.isProduction ? jsonRequestLog(lines) : readableRequestLog(lines)
  }))

export const LoggingLive = Layer.unwrap(Effect.gen(function*() {
  const config = yield* PlinthConfig
  return Layer.mergeAll(
    Logger.layer([config.isProduction ? productionLogger : readableLogger]),
    Layer.succeed(References.MinimumLogLevel, config.logLevel),
    requestLogTo(process)
  )
}))
