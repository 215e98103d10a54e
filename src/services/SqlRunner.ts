/**
 * Runs one guarded statement for a caller: in the caller's transaction, pipelined, peeked at first
 * when it is a SELECT (AsCaller), with the request's JSON values as bind parameters, and with the result
 * written straight to JSON text as the rows stream in, so that a result over the size limit fails
 * early instead of filling memory.
 */
import { Context, Duration, Effect, Layer, Option, Schema, Stream } from "effect"
import type { SqlClient, SqlError } from "effect/sql"
import { type CatalogWatch, changingCatalog } from "./CatalogWatch.ts"
import { type RequestContext, statementTimeoutMillis } from "./RequestContext.ts"
import { boundedPipelined, executePipelined, peekPipelined, withPipelinedTransaction } from "./AsCaller.ts"
import { NO_JSON_FORM } from "./JsonColumnTypes.ts"
import type { GuardedStatement } from "./SqlGuard.ts"
import type { StatementConnections } from "./StatementConnections.ts"

/** A result column whose type has no JSON form (JsonColumnTypes), or an array the driver cannot read. */
export class UnsupportedResult extends Schema.TaggedError<UnsupportedResult>()("UnsupportedResult", {
  message: Schema.String
}) {}

export class ResponseTooLarge extends Schema.TaggedError<ResponseTooLarge>()("ResponseTooLarge", {
  limitBytes: Schema.Number
}) {}

/** The result, its rows already JSON text (`[{...},...]`): serialised once, on the way in. */
export interface StatementResult {
  readonly rowsJson: string
  readonly rowCount: number
}

/**
 * JSON → bind parameter. Everything goes as untyped text, so PostgreSQL infers each parameter's
 * type from where it is used: a number fills an integer, numeric or text column alike without
 * losing digits, and an object or array fills a json or jsonb column or parameter. Where the
 * type cannot be inferred (`$1 ->> 'a'`), the caller casts (`$1::jsonb ->> 'a'`).
 */
export const toParameter = (value: unknown): string | null => {
  if (value === null || value === undefined) return null
  if (typeof value === "string") return value
  if (typeof value === "number" || typeof value === "boolean") return String(value)
  return JSON.stringify(value)
}

interface CodecFailure { readonly _tag?: string; readonly message?: string; readonly cause?: unknown }

/** The driver's decoding failure inside a SqlError (it surfaces as a defect of the stream). */
const codecFailure = (defect: unknown): string | undefined => {
  let cause: unknown = defect
  for (let depth = 0; depth < 4 && typeof cause === "object" && cause !== null; depth++) {
    const current = cause as CodecFailure & { readonly reason?: unknown }
    if (current._tag === "PgTypesCodecError") return current.message
    cause = current.reason ?? current.cause
  }
  return undefined
}

/** A row larger than the driver's message limit (the response bound): the connection is lost with it. */
const rowTooLarge = (error: unknown): boolean => {
  const parse = (error as { readonly reason?: { readonly cause?: CodecFailure } } | undefined)?.reason?.cause
  return parse?._tag === "PgProtocolParseError" && /exceeds maxMessageSize/.test(parse.message ?? "")
}

const unsupportedResults = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  maxResponseBytes: number
): Effect.Effect<A, E | UnsupportedResult | ResponseTooLarge, R> =>
  Effect.catchCause(effect, (cause): Effect.Effect<never, E | UnsupportedResult | ResponseTooLarge> => {
    const failures = cause.reasons.map((reason) => reason._tag === "Die" ? reason.defect : reason._tag === "Fail" ? reason.error : undefined)
    if (failures.some(rowTooLarge)) return Effect.fail(new ResponseTooLarge({ limitBytes: maxResponseBytes }))
    const message = failures.map(codecFailure).find((found) => found !== undefined)
    if (message === undefined) return Effect.failCause(cause)
    return Effect.fail(new UnsupportedResult({
      message: message.includes(NO_JSON_FORM) ? message : `a result column cannot be sent as JSON (${message}); cast it to text`
    }))
  })

/** Runs guarded statements as their callers; rows stream into JSON text, bounded by `maxResponseBytes`. */
export class SqlRunner extends Context.Service<SqlRunner, {
  readonly run: (
    context: RequestContext,
    text: string,
    params: ReadonlyArray<unknown>,
    statement: GuardedStatement,
    maxResponseBytes: number
  ) => Effect.Effect<StatementResult, SqlError.SqlError | UnsupportedResult | ResponseTooLarge, StatementConnections | SqlClient.SqlClient | CatalogWatch>
}>()("plinth/SqlRunner") {
  static readonly layer = Layer.sync(SqlRunner, () => {
    const longWay = makeLongWay()
    return SqlRunner.of({
      run: (context, text, params, statement, maxResponseBytes) => {
        const run = runGuarded(longWay, context, text, params, statement, maxResponseBytes)
        return statement.callsSys ? changingCatalog(run) : run
      }
    })
  })
}

// On every request: untraced (docs/performance-notes.md).
const runGuarded = Effect.fnUntraced(function*(
  longWay: LongWay,
  context: RequestContext,
  text: string,
  params: ReadonlyArray<unknown>,
  statement: GuardedStatement,
  maxResponseBytes: number
) {
  const values = params.map(toParameter)
  if (!statement.returnsRows) {
    // No rows to send, only the count from the command tag.
    return { rowsJson: "[]", rowCount: (yield* executePipelined(context, text, values)).rowCount } satisfies StatementResult
  }
  let longContext = context
  const seen = longWay.get(text)
  if (statement.kind === "SELECT" && !statement.writesInCte && seen !== "long") {
    const started = performance.now()
    const read = seen === undefined
      ? peekPipelined(context, text, values)
      : boundedPipelined(context, text, values, BOUNDED_ROWS, BOUNDED_BYTES)
    const peeked = yield* unsupportedResults(read, maxResponseBytes)
    if (Option.isSome(peeked)) {
      const rows = jsonRows(maxResponseBytes)
      for (const row of peeked.value) yield* rows.add(row)
      return rows.result()
    }
    longWay.remember(text, seen === undefined ? "bounded" : "long")
    longContext = withTimeSpent(context, performance.now() - started)
  }
  return yield* unsupportedResults(withPipelinedTransaction(longContext, (connection) =>
    Effect.suspend(() => {
      const rows = jsonRows(maxResponseBytes)
      return connection.stream(text, values).pipe(Stream.runForEach(rows.add), Effect.map(rows.result))
    })), maxResponseBytes)
})

/**
 * `context` with only what is left of its statement timeout after `spentMs` (the caller's deadline
 * covers the peek and the long way together). At least 1 ms: a statement_timeout of 0 means none.
 */
const withTimeSpent = (context: RequestContext, spentMs: number): RequestContext => ({
  ...context,
  statementTimeout: Duration.millis(Math.max(1, statementTimeoutMillis(context) - spentMs))
})

/** Rows written to JSON text as they are added, each measured: past `maxBytes` in all, ResponseTooLarge. */
const jsonRows = (maxBytes: number) => {
  const parts: Array<string> = []
  let bytes = 2
  return {
    add: (row: unknown): Effect.Effect<void, ResponseTooLarge | UnsupportedResult> => {
      let json: string
      try {
        json = JSON.stringify(row)
      } catch {
        // JSON.stringify recurses: a json value nested thousands deep overflows the stack.
        return Effect.fail(new UnsupportedResult({ message: "a result value is nested too deeply to send as JSON; cast it to text" }))
      }
      bytes += Buffer.byteLength(json) + 1
      if (bytes > maxBytes) return Effect.fail(new ResponseTooLarge({ limitBytes: maxBytes }))
      parts.push(json)
      return Effect.void
    },
    result: (): StatementResult => ({ rowsJson: `[${parts.join(",")}]`, rowCount: parts.length })
  }
}

/** A list's worth of rows (a console page is 50), and a bound on what a bounded read holds. */
const BOUNDED_ROWS = 100
const BOUNDED_BYTES = 1024 * 1024

const LONG_WAY_MAX = 1_000
const REMEMBERED_TEXT_MAX = 1_024

/**
 * SELECT texts a peek did not settle (more than one row, a write). The next call of a text with
 * more than one row is read bounded (`boundedPipelined`: up to BOUNDED_ROWS rows and BOUNDED_BYTES
 * in one round trip, planned once); a text that is more than that, or writes, goes the long way at
 * once ("long") instead of paying a wasted round trip. Bounded (texts up to 1,024 characters, at
 * most 1,000 of them, the oldest forgotten first): a longer text is peeked at every time.
 */
const makeLongWay = () => {
  const texts = new Map<string, "bounded" | "long">()
  return {
    get: (text: string) => texts.get(text),
    remember: (text: string, way: "bounded" | "long") => {
      if (text.length > REMEMBERED_TEXT_MAX) return
      if (!texts.has(text) && texts.size >= LONG_WAY_MAX) texts.delete(texts.keys().next().value!)
      texts.set(text, way)
    }
  }
}
type LongWay = ReturnType<typeof makeLongWay>
