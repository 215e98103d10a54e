/**
 * PostgreSQL's own parser (libpg-query, WebAssembly): the one place that turns SQL text into
 * statements, so migrations and the SQL guard agree with the server on where a statement ends.
 */
import { Effect, Schema } from "effect"
import { parse, type ParseResult } from "libpg-query"

export class SqlParseError extends Schema.TaggedError<SqlParseError>()("SqlParseError", {
  message: Schema.String,
  /** 1-based character offset into the text, when the parser knows it. */
  position: Schema.NullOr(Schema.Number)
}) {}

interface ParserError { readonly message?: string; readonly sqlDetails?: { readonly cursorPosition?: number } }

export const parseSql = Effect.fn("SqlParser.parse")((text: string) =>
  Effect.tryPromise({
    try: (): Promise<ParseResult> => parse(text),
    catch: (cause) => {
      const error = cause as ParserError
      const cursor = error.sqlDetails?.cursorPosition
      return new SqlParseError({
        message: error.message ?? "could not parse SQL",
        position: typeof cursor === "number" ? cursor + 1 : null
      })
    }
  })
)

/**
 * Splits a script into its statements' texts. Offsets from the parser count UTF-8 bytes, so the
 * slicing happens on bytes; empty statements (stray semicolons) disappear.
 */
export const splitStatements = Effect.fn("SqlParser.splitStatements")(function*(text: string) {
  const result = yield* parseSql(text)
  const bytes = Buffer.from(text, "utf8")
  return (result.stmts ?? [])
    .map((stmt) => {
      const start = stmt.stmt_location ?? 0
      const end = stmt.stmt_len === undefined || stmt.stmt_len === 0 ? bytes.length : start + stmt.stmt_len
      return bytes.subarray(start, end).toString("utf8").trim()
    })
    .filter((statement) => statement.length > 0)
})
