/**
 * The HTTP face of failure, in one place: the two body shapes of spec §7, the database-code →
 * status table, production scrubbing, and the error classes that routes fail with.
 *
 * Every error class here is `Respondable`, so whichever route raises it (an HttpApi endpoint or a
 * plain router route), the same response goes out.
 */
import { type Cause, Effect, Schema } from "effect"
import { HttpServerRespondable, HttpServerResponse } from "effect/http"
import { HttpApiSchema } from "effect/http-api"
import { SqlError } from "effect/sql"
import { type DatabaseErrorFields, databaseErrorFields, scrubQuotedValue, sqlState } from "../services/DatabaseError.ts"

// ---------------------------------------------------------------------------------------------
// Shape 1: { error: string }

/** The plain body: pre-query validation, auth endpoints, chat pre-stream errors. */
export const PlainErrorBody = Schema.Struct({ error: Schema.String })

const plainResponse = (status: number, error: string, headers?: Record<string, string>) =>
  HttpServerResponse.jsonUnsafe({ error }, { status, ...(headers ? { headers } : {}) })

const PlainFields = { error: Schema.String }

/** The `{ error }` response of an error class of `status`, the same whichever route raises it. */
// `any` as a mixin requires of its base's constructor arguments; not exported.
const respondsPlain = <Base extends abstract new(...args: Array<any>) => { readonly error: string }>(base: Base, status: number) => {
  abstract class Plain extends base {
    [HttpServerRespondable.symbol]() { return Effect.succeed(plainResponse(status, this.error)) }
  }
  return Plain
}

/**
 * A `{ error }` error class of `status`, documented with that status (and what it means) in
 * `/openapi.json`. Its `_tag` (the identifier, on the prototype: never in the body) makes it a
 * tagged failure for `Effect.catchTag`, on the server and in the client.
 */
const plainError = <Self, const Tag extends string>(identifier: Tag, status: number, description: string): PlainError<Self, Tag> => {
  abstract class Tagged extends respondsPlain(Schema.Error<Self>(identifier)(PlainFields, { httpApiStatus: status, description }) as PlainErrorBase<Self>, status) {
    get _tag(): Tag { return identifier }
  }
  // Abstract only because a mixin over an abstract base must be; every error class extending it is concrete.
  return Tagged as unknown as PlainError<Self, Tag>
}

type PlainErrorBase<Self> = Schema.Class<Self, Schema.Struct<typeof PlainFields>, Cause.YieldableError>
/** Spelled out for the package's declarations (`plinth/client`), which cannot name the mixin's inferred type. */
type PlainError<Self, Tag extends string> =
  & PlainErrorBase<Self>
  & (abstract new(...args: Array<any>) => HttpServerRespondable.Respondable & { readonly _tag: Tag })

export class BadRequest extends plainError<BadRequest, "BadRequest">("BadRequest", 400, "Invalid input: `error` says what is wrong.") {}
export class Unauthorized extends plainError<Unauthorized, "Unauthorized">("Unauthorized", 401, "Not signed in: no token, or an invalid, expired or spent one.") {}
export class Forbidden extends plainError<Forbidden, "Forbidden">("Forbidden", 403, "The caller may not do this.") {}
export class NotFound extends plainError<NotFound, "NotFound">("NotFound", 404, "Not found.") {}
export class UnsupportedMediaType extends plainError<UnsupportedMediaType, "UnsupportedMediaType">("UnsupportedMediaType", 415, "The body is not JSON.") {}
export class Conflict extends plainError<Conflict, "Conflict">("Conflict", 409, "In conflict with what exists.") {}
export class BadGateway extends plainError<BadGateway, "BadGateway">("BadGateway", 502, "A service Plinth relies on failed.") {}
export class Unavailable extends plainError<Unavailable, "Unavailable">("Unavailable", 503, "The database is unavailable, or the server is shutting down.") {}
export class PayloadTooLarge extends Schema.Error<PayloadTooLarge>("PayloadTooLarge")({}, { httpApiStatus: 413 }) {
  get _tag() { return "PayloadTooLarge" as const }
  [HttpServerRespondable.symbol]() { return Effect.succeed(plainResponse(413, statusMessage(413))) }
}

export class TooManyRequests extends Schema.Error<TooManyRequests>("TooManyRequests")({
  error: Schema.String,
  retryAfterSeconds: Schema.Int
}, { httpApiStatus: 429 }) {
  get _tag() { return "TooManyRequests" as const }
  [HttpServerRespondable.symbol]() {
    return Effect.succeed(plainResponse(429, this.error, { "retry-after": String(this.retryAfterSeconds) }))
  }
}

/**
 * TooManyRequests as an endpoint declares it: on the wire a plain `{ error }` body and the wait in
 * `Retry-After`, as the error's own response has them, so that `/openapi.json` and clients read them.
 */
export const RateLimited = TooManyRequests.pipe(HttpApiSchema.encodeToWithHeaders({
  body: Schema.Struct(PlainFields).annotate({ identifier: "TooManyRequests", httpApiStatus: 429 }),
  headers: { "retry-after": Schema.NumberFromString.pipe(Schema.check(Schema.isInt())) }
}, {
  decode: ({ body, headers }) => new TooManyRequests({ error: body.error, retryAfterSeconds: headers["retry-after"] }),
  encode: (error) => ({ body: { error: error.error }, headers: { "retry-after": error.retryAfterSeconds } })
})).annotate({ description: "A rate limit or a concurrency bound: try again after `Retry-After` seconds." })

/**
 * For routes whose database failures are not the caller's SQL: a connection, resource or shutdown
 * class (08, 53, 57) is a 503; a value PostgreSQL cannot take (class 22: a NUL byte, an unpaired
 * surrogate in JSON, a malformed number) is the caller's 400; anything else is a bug and becomes
 * a logged 500.
 */
export const databaseUnavailable = <A, E, R>(effect: Effect.Effect<A, E | SqlError.SqlError, R>) =>
  Effect.catchIf(effect, SqlError.isSqlError, (error): Effect.Effect<never, Unavailable | BadRequest> => {
    const code = sqlState(error) ?? "08000"
    if (statusForSqlState(code) === 503) return Effect.fail(new Unavailable({ error: "database unavailable" }))
    if (code.startsWith("22")) return Effect.fail(new BadRequest({ error: `invalid value: ${databaseErrorFields(error).message}` }))
    return Effect.die(error)
  })

/** What a 415 says, whichever route answers it: what to send instead. */
export const UNSUPPORTED_MEDIA_TYPE = "unsupported media type: send JSON (Content-Type: application/json)"

/** The reason phrase used when a response left the platform with an error status and no body. */
const statusMessages: Record<number, string> = {
  400: "bad request",
  401: "unauthorized",
  403: "forbidden",
  404: "not found",
  405: "method not allowed",
  408: "request timeout",
  409: "conflict",
  413: "request body too large",
  415: UNSUPPORTED_MEDIA_TYPE,
  429: "too many requests",
  431: "request headers too large",
  499: "client closed request",
  500: "internal server error",
  502: "bad gateway",
  503: "service unavailable"
}
export const statusMessage = (status: number): string => statusMessages[status] ?? "error"

/**
 * Gives an error response that is not JSON (empty, or the framework's plain text such as 415
 * "Unsupported content-type") the plain `{ error }` body, so no client ever sees another shape.
 */
export const withErrorBody = (response: HttpServerResponse.HttpServerResponse): HttpServerResponse.HttpServerResponse => {
  if (response.status < 400) return response
  const body = response.body
  if (body._tag === "Empty") return HttpServerResponse.jsonUnsafe({ error: statusMessage(response.status) }, { status: response.status, headers: response.headers })
  // The platform's own 415 ("Unsupported content-type") says what is wrong but not what to send.
  if (response.status === 415 && !(body._tag === "Uint8Array" && body.contentType.includes("json"))) {
    return HttpServerResponse.jsonUnsafe({ error: UNSUPPORTED_MEDIA_TYPE }, { status: 415 })
  }
  if (body._tag === "Uint8Array" && !body.contentType.includes("json")) {
    const text = new TextDecoder().decode(body.body).trim()
    return HttpServerResponse.jsonUnsafe({ error: text === "" ? statusMessage(response.status) : text.slice(0, 500) }, { status: response.status })
  }
  return response
}

// ---------------------------------------------------------------------------------------------
// Shape 2: { error: { message, code, detail, hint, position } }

export const DatabaseErrorBody = Schema.Struct({
  error: Schema.Struct({
    message: Schema.String,
    code: Schema.String,
    detail: Schema.NullOr(Schema.String),
    hint: Schema.NullOr(Schema.String),
    position: Schema.NullOr(Schema.Int)
  })
})
export type DatabaseErrorBody = typeof DatabaseErrorBody.Type

/** Shape 2 as a failure of `/sql` and `/function` (which answer it themselves: databaseErrorResponse). */
export class DatabaseError extends Schema.Error<DatabaseError>("DatabaseError")(DatabaseErrorBody.fields, {
  description: "The database refused the statement (shape 2): `code` is its SQLSTATE, which decides the status (docs/api.md, section 8)."
}) {
  get _tag() { return "DatabaseError" as const }
}

/** The statuses shape 2 can have (statusForSqlState), each declared for `/openapi.json` and clients. */
export const DatabaseErrors = [400, 403, 409, 503].map((status) => DatabaseError.annotate({ httpApiStatus: status }))

/** Spec §7: the HTTP status of a SQLSTATE. */
export const statusForSqlState = (code: string): number => {
  if (code === "42501") return 403
  const sqlClass = code.slice(0, 2)
  switch (sqlClass) {
    case "28":
      return 403
    case "23":
    case "40":
      return 409
    case "42":
      return 400
    case "08":
    case "53":
    case "57":
      return 503
    default:
      return 400
  }
}

/**
 * Production scrubbing: literal values in `detail`/`hint` are hidden. `Key (email)=(a@b.c)` keeps
 * the column list and loses the value; `Failing row contains (...)` loses the row; a quoted value
 * (`Token "…" is invalid.`) becomes `"***"` as in messages (scrubQuotedValue).
 */
export const scrub = (text: string): string =>
  scrubQuotedValue(text)
    .replace(KEY_VALUES, ")=(***)")
    .replace(/(Failing row contains \().*(\))/gs, "$1***$2")

/**
 * The `=(values)` of PostgreSQL's key details ("Key (cols)=(values) already exists.", "... is not
 * present in table", "... is still referenced from", "... conflicts with existing key (cols)=(values).").
 * The value ends where such a phrase (or the sentence) begins, so parentheses inside it
 * or inside the column list do not cut it short.
 */
const KEY_VALUES = /\)=\((.*?)\)(?= already exists| is | conflicts with|\.?\s*$)/gs

const nullable = (value: string | undefined): string | null => (value === undefined || value === "" ? null : value)

export const databaseErrorBody = (fields: DatabaseErrorFields, options: { readonly production: boolean }): DatabaseErrorBody => {
  const detail = nullable(fields.detail)
  const hint = nullable(fields.hint)
  const position = fields.position === undefined ? null : Number(fields.position)
  return {
    error: {
      message: options.production ? scrubQuotedValue(fields.message) : fields.message,
      code: fields.code ?? "XX000",
      detail: detail !== null && options.production ? scrub(detail) : detail,
      hint: hint !== null && options.production ? scrub(hint) : hint,
      position: position !== null && Number.isInteger(position) ? position : null
    }
  }
}

export const databaseErrorResponse = (fields: DatabaseErrorFields, options: { readonly production: boolean }) =>
  HttpServerResponse.jsonUnsafe(databaseErrorBody(fields, options), {
    status: statusForSqlState(fields.code ?? "XX000")
  })
