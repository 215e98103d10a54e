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
