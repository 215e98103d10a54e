/**
 * PostgreSQL's own parser (libpg-query, WebAssembly): the one place that turns SQL text into
 * statements, so migrations and the SQL guard agree with the server on where a statement ends.
 */
import { Effect, Schema } from "effect"
import type { ParseResult } from "libpg-query"
import { createRequire } from "node:module"

export class SqlParseError extends Schema.TaggedError<SqlParseError>()("SqlParseError", {
  message: Schema.String,
  /** 1-based character offset into the text, when the parser knows it. */
  position: Schema.NullOr(Schema.Number)
}) {}

/** The text nests deeper than the parser's stack: a statement PostgreSQL would not run either. */
export class SqlTooDeep extends Schema.TaggedError<SqlTooDeep>()("SqlTooDeep", {
  message: Schema.String
}) {}

interface ParserError { readonly message?: string; readonly sqlDetails?: { readonly cursorPosition?: number } }

type LibPgQuery = typeof import("libpg-query")

const require = createRequire(import.meta.url)
const LIBRARY = require.resolve("libpg-query")

/**
 * A fresh evaluation of the library, with an instance of its WebAssembly module of its own. A
 * stack overflow inside the module leaves it unusable (its own stack pointer and memory are never
 * restored, and after a few every parse fails), so the instance it happened in is dropped.
 */
const loadLibrary = (): { readonly library: LibPgQuery; readonly ready: Promise<void> } => {
  delete require.cache[LIBRARY]
  const library = require(LIBRARY) as LibPgQuery
  return { library, ready: library.loadModule() }
}

let current = loadLibrary()
let loaded: LibPgQuery | undefined
const whenLoaded = (instance: typeof current) => {
  void instance.ready.then(() => {
    if (current === instance) loaded = instance.library
  }, () => undefined)
}
whenLoaded(current)

const TOO_DEEP = "the statement is nested too deeply"

const parseWith = (library: LibPgQuery, text: string): Effect.Effect<ParseResult, SqlParseError | SqlTooDeep> =>
  Effect.try({
    try: () => library.parseSync(text),
    catch: (cause) => {
      if (!(cause instanceof library.SqlError) && text !== "") {
        // Whatever else failed (a stack overflow, a trap) ran inside the module: replace it.
        if (current.library === library) {
          loaded = undefined
          current = loadLibrary()
          whenLoaded(current)
        }
        if (cause instanceof RangeError) return new SqlTooDeep({ message: TOO_DEEP })
      }
      const error = cause as ParserError
      const cursor = error.sqlDetails?.cursorPosition
      return new SqlParseError({
        message: error.message ?? "could not parse SQL",
        position: typeof cursor === "number" ? cursor + 1 : null
      })
    }
  })

export const parseSql = (text: string): Effect.Effect<ParseResult, SqlParseError | SqlTooDeep> => {
  const library = loaded
  if (library !== undefined) return parseWith(library, text)
  const instance = current
  return Effect.flatMap(
    Effect.tryPromise({ try: () => instance.ready, catch: () => new SqlParseError({ message: "the SQL parser could not be loaded", position: null }) }),
    () => parseWith(instance.library, text)
  )
}

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
