/**
 * What PostgreSQL said when a statement failed, lifted out of the driver's error: the SQLSTATE
 * and the fields spec §7 passes on to callers.
 */
import type { SqlError } from "effect/sql"

export interface DatabaseErrorFields {
  readonly message: string
  readonly code?: string | undefined
  readonly detail?: string | undefined
  readonly hint?: string | undefined
  readonly position?: string | number | undefined
}

interface ServerError {
  readonly message?: unknown
  readonly code?: unknown
  readonly detail?: unknown
  readonly hint?: unknown
  readonly position?: unknown
}

const text = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined)

/** Five characters of [0-9A-Z]: a Node socket error code (ECONNREFUSED) is not one. */
const SQLSTATE = /^[0-9A-Z]{5}$/

/** The server's error response behind a driver failure; connection failures have no SQLSTATE. */
export const databaseErrorFields = (error: SqlError.SqlError): DatabaseErrorFields => {
  const cause = (error.reason as { readonly cause?: ServerError }).cause ?? {}
  const code = text(cause.code)
  if (code === undefined || !SQLSTATE.test(code)) {
    // Not PostgreSQL speaking: nothing of it (host, port) goes to the caller.
    return { message: "database unavailable", code: undefined }
  }
  return {
    message: text(cause.message) ?? error.message,
    code,
    detail: text(cause.detail),
    hint: text(cause.hint),
    position: typeof cause.position === "number" ? cause.position : text(cause.position)
  }
}

export const sqlState = (error: SqlError.SqlError): string | undefined => databaseErrorFields(error).code

/** One line for any failure: PostgreSQL's own message when there is one. */
export const describeFailure = (cause: unknown): string => {
  const error = cause as { readonly reason?: { readonly cause?: { readonly message?: unknown } }; readonly message?: unknown }
  const server = error.reason?.cause?.message
  if (typeof server === "string" && server !== "") return server
  return typeof error.message === "string" ? error.message : String(cause)
}

/**
 * PostgreSQL's messages (and details) that quote a value, which may come from a column as readily
 * as from the caller (`title::bool` over rows the caller cannot see): each pattern keeps the words
 * and its replacement puts `***` where the value was. Messages that quote names (`relation "x"
 * does not exist`) are left alone, so a name cast from a value (`title::regclass`) is not hidden.
 */
export const QUOTED_VALUES: ReadonlyArray<readonly [RegExp, string]> = [
  // invalid input syntax for type integer: "…", invalid input value for enum mood: "…", malformed array
  // literal: "…", date/time field value out of range: "…", invalid hexadecimal digit: "…", and the like.
  [/^(.*?: )".*"$/s, "$1\"***\""],
  [/^(value )".*"( is out of range for type .*)$/s, "$1\"***\"$2"],
  [/^".*"( is out of range for type .*)$/s, "\"***\"$1"],
  [/^(invalid value )".*"( for "[^"]*")$/s, "$1\"***\"$2"],
  [/^(invalid byte sequence for encoding "[^"]*": ).*$/s, "$1***"],
  [/^(character with byte sequence ).*( in encoding "[^"]*" has no equivalent in encoding "[^"]*")$/s, "$1***$2"],
  [/^(time zone )".*"( not recognized)$/s, "$1\"***\"$2"],
  [/^(unit )".*"( not (?:recognized|supported) for type .*)$/s, "$1\"***\"$2"],
  [/^(invalid symbol )".*"( found while decoding .*)$/s, "$1\"***\"$2"],
  [/^(invalid (?:source |destination )?encoding name )".*"$/s, "$1\"***\""],
  [/^(.* at or near )".*"( of jsonpath input)$/s, "$1\"***\"$2"],
  [/^(Token )".*"( is invalid\.)$/s, "$1\"***\"$2"],
  [/^(Escape sequence )".*"( is invalid\.)$/s, "$1\"***\"$2"],
  [/^(Expected .*, but found )".*"(\.)$/s, "$1\"***\"$2"],
  [/^(Unexpected )".*"( character\.)$/s, "$1\"***\"$2"]
]

/** `text` with the value it quotes hidden (QUOTED_VALUES), for production. */
export const scrubQuotedValue = (text: string): string => {
  for (const [pattern, replacement] of QUOTED_VALUES) {
    if (pattern.test(text)) return text.replace(pattern, replacement)
  }
  return text
}
