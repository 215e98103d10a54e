/** Spec §7, row by row: the status of every database error class, both body shapes, scrubbing. */
import { describe, expect, it } from "vitest"
import {
  BadRequest,
  Conflict,
  databaseErrorBody,
  databaseErrorResponse,
  Forbidden,
  NotFound,
  scrub,
  statusForSqlState,
  TooManyRequests,
  Unauthorized,
  Unavailable,
  withErrorBody
} from "../../src/http/Errors.ts"
import { scrubQuotedValue } from "../../src/services/DatabaseError.ts"
import { Effect } from "effect"
import { HttpServerRespondable, HttpServerResponse } from "effect/http"

describe("database error code → HTTP status (spec §7)", () => {
  it.each([
    ["42501", 403, "permission denied"],
    ["28000", 403, "invalid authorization specification"],
    ["28P01", 403, "invalid password"],
    ["23505", 409, "unique violation"],
    ["23503", 409, "foreign-key violation"],
    ["23514", 409, "check violation"],
    ["23502", 409, "not-null violation"],
    ["40001", 409, "serialization failure"],
    ["40P01", 409, "deadlock"],
    ["42601", 400, "syntax error"],
    ["42P01", 400, "undefined table"],
    ["42703", 400, "undefined column"],
    ["42883", 400, "undefined function"],
    ["08006", 503, "connection failure"],
    ["08001", 503, "unable to connect"],
    ["53300", 503, "too many connections"],
    ["53100", 503, "disk full"],
    ["57014", 503, "query canceled"],
    ["57P01", 503, "admin shutdown"],
    ["P0001", 400, "raise_exception"],
    ["22P02", 400, "invalid text representation (other)"],
    ["XX000", 400, "internal error (other)"]
  ])("%s → %i (%s)", (code, status) => {
    expect(statusForSqlState(code)).toBe(status)
  })

  it("42501 is 403 although the rest of class 42 is 400", () => {
    expect(statusForSqlState("42501")).toBe(403)
    expect(statusForSqlState("42502")).toBe(400)
  })
})

describe("structured database error body", () => {
  const violation = {
    message: "duplicate key value violates unique constraint \"users_email_key\"",
    code: "23505",
    detail: "Key (email)=(ada@example.com) already exists.",
    hint: undefined,
    position: undefined
  }

  it("has exactly message, code, detail, hint, position; absent fields are null", () => {
    const body = databaseErrorBody(violation, { production: false })
    expect(body).toEqual({
      error: {
        message: violation.message,
        code: "23505",
        detail: "Key (email)=(ada@example.com) already exists.",
        hint: null,
        position: null
      }
    })
  })

  it("position is an integer offset into the SQL text", () => {
    const body = databaseErrorBody({ message: "syntax error at or near \"FORM\"", code: "42601", position: "10" }, { production: false })
    expect(body.error.position).toBe(10)
  })

  it("production hides the value in key-detail parentheses", () => {
    const body = databaseErrorBody(violation, { production: true })
    expect(body.error.detail).toBe("Key (email)=(***) already exists.")
    expect(body.error.message).toBe(violation.message)
  })

  it("production hides the failing-row contents", () => {
    const body = databaseErrorBody({
      message: "new row for relation \"t\" violates check constraint \"t_n_check\"",
      code: "23514",
      detail: "Failing row contains (1, secret value, 42)."
    }, { production: true })
    expect(body.error.detail).toBe("Failing row contains (***).")
  })

  it("production scrubs hints too; development leaves both alone", () => {
    const hint = "Key (a, b)=(1, x) is referenced."
    expect(databaseErrorBody({ message: "m", code: "23503", hint }, { production: true }).error.hint).toBe("Key (a, b)=(***) is referenced.")
    expect(databaseErrorBody({ message: "m", code: "23503", hint }, { production: false }).error.hint).toBe(hint)
  })

  it.each([
    ["Key (id)=(5) is not present in table \"parent\".", "Key (id)=(***) is not present in table \"parent\"."],
    ["Key (lower(email::text))=(a@b.c) already exists.", "Key (lower(email::text))=(***) already exists."],
    ["Failing row contains (null, (nested), x).", "Failing row contains (***)."],
    ["No values here.", "No values here."]
  ])("scrub(%j)", (input, expected) => {
    expect(scrub(input)).toBe(expected)
  })

  it("the response carries the mapped status", () => {
    expect(databaseErrorResponse(violation, { production: false }).status).toBe(409)
    expect(databaseErrorResponse({ message: "m", code: "57P01" }, { production: false }).status).toBe(503)
  })
})

// Issue #19: a caller's condition that fails on a value (`title::bool`) shows the value in the message.
describe("production scrubbing of values quoted in messages", () => {
  it.each([
    ["invalid input syntax for type boolean: \"secret title\"", "invalid input syntax for type boolean: \"***\""],
    ["invalid input syntax for type integer: \"a: \"quoted\" b\"", "invalid input syntax for type integer: \"***\""],
    ["invalid input syntax for type uuid: \"not-a-uuid\"", "invalid input syntax for type uuid: \"***\""],
    ["invalid input value for enum mood: \"furious\"", "invalid input value for enum mood: \"***\""],
    ["malformed array literal: \"{\"unterminated}\"", "malformed array literal: \"***\""],
    ["date/time field value out of range: \"2026-13-45\"", "date/time field value out of range: \"***\""],
    ["value \"99999999999\" is out of range for type integer", "value \"***\" is out of range for type integer"],
    ["\"1e999\" is out of range for type double precision", "\"***\" is out of range for type double precision"],
    ["invalid value \"ab\" for \"MM\"", "invalid value \"***\" for \"MM\""],
    ["invalid byte sequence for encoding \"UTF8\": 0xe9 0x20 0x73", "invalid byte sequence for encoding \"UTF8\": ***"],
    ["time zone \"secret\" not recognized", "time zone \"***\" not recognized"],
    ["unit \"secret\" not recognized for type timestamp with time zone", "unit \"***\" not recognized for type timestamp with time zone"],
    ["invalid source encoding name \"secret\"", "invalid source encoding name \"***\""],
    ["syntax error at or near \"secret\" of jsonpath input", "syntax error at or near \"***\" of jsonpath input"],
    // Details of json input errors
    ["Token \"secret\" is invalid.", "Token \"***\" is invalid."],
    ["Expected \":\", but found \"secret\".", "Expected \":\", but found \"***\"."],
    // Names and the caller's own SQL text stay
    ["relation \"no_such_table\" does not exist", "relation \"no_such_table\" does not exist"],
    ["syntax error at or near \"FORM\"", "syntax error at or near \"FORM\""],
    ["value too long for type character varying(3)", "value too long for type character varying(3)"],
    ["new row for relation \"t\" violates check constraint \"t_n_check\"", "new row for relation \"t\" violates check constraint \"t_n_check\""],
    ["duplicate key value violates unique constraint \"users_email_key\"", "duplicate key value violates unique constraint \"users_email_key\""],
    ["integer out of range", "integer out of range"]
  ])("scrubQuotedValue(%j)", (input, expected) => {
    expect(scrubQuotedValue(input)).toBe(expected)
  })

  it("production scrubs the message, detail and hint; development leaves them", () => {
    const fields = { message: "invalid input syntax for type json", code: "22P02", detail: "Token \"secret\" is invalid." }
    expect(databaseErrorBody(fields, { production: true }).error.detail).toBe("Token \"***\" is invalid.")
    const cast = { message: "invalid input syntax for type boolean: \"secret\"", code: "22P02" }
    expect(databaseErrorBody(cast, { production: true }).error.message).toBe("invalid input syntax for type boolean: \"***\"")
    expect(databaseErrorBody(cast, { production: false }).error.message).toBe(cast.message)
  })
})

describe("plain error body", () => {
  const respond = (error: HttpServerRespondable.Respondable) => Effect.runSync(HttpServerRespondable.toResponse(error))
  const bodyOf = (response: HttpServerResponse.HttpServerResponse) =>
    response.body._tag === "Uint8Array" ? JSON.parse(new TextDecoder().decode(response.body.body)) as unknown : undefined

  it.each([
    [new BadRequest({ error: "sql is required" }), 400],
    [new Unauthorized({ error: "invalid token" }), 401],
    [new Forbidden({ error: "forbidden" }), 403],
    [new NotFound({ error: "conversation not found" }), 404],
    [new Conflict({ error: "email already invited" }), 409],
    [new Unavailable({ error: "database unavailable" }), 503]
  ])("%s → its status with { error }", (error, status) => {
    const response = respond(error)
    expect(response.status).toBe(status)
    expect(bodyOf(response)).toEqual({ error: error.error })
  })

  it("429 carries Retry-After in whole seconds", () => {
    const response = respond(new TooManyRequests({ error: "too many requests", retryAfterSeconds: 42 }))
    expect(response.status).toBe(429)
    expect(response.headers["retry-after"]).toBe("42")
    expect(bodyOf(response)).toEqual({ error: "too many requests" })
  })

  it("an empty error response gets a body; success and bodied responses are left alone", () => {
    expect(bodyOf(withErrorBody(HttpServerResponse.empty({ status: 413 })))).toEqual({ error: "request body too large" })
    expect(withErrorBody(HttpServerResponse.empty({ status: 204 })).body._tag).toBe("Empty")
    const own = HttpServerResponse.jsonUnsafe({ error: "mine" }, { status: 400 })
    expect(withErrorBody(own)).toBe(own)
  })
})

describe("scrubbing every key-detail form PostgreSQL writes", () => {
  it.each([
    ["Key (a)=(1) conflicts with existing key (a)=(2).", "Key (a)=(***) conflicts with existing key (a)=(***)."],
    ["Key (id)=(7) is still referenced from table \"child\".", "Key (id)=(***) is still referenced from table \"child\"."],
    ["Key (note)=(has (parens) inside) already exists.", "Key (note)=(***) already exists."]
  ])("scrub(%j)", (input, expected) => {
    expect(scrub(input)).toBe(expected)
  })
})
