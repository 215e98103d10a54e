/**
 * Request-decoding failures of HttpApi endpoints as `400 { "error": "<what is wrong>" }`,
 * never the framework's empty 400.
 */
import { Effect, Schema, SchemaIssue } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiMiddleware } from "effect/http-api"
import { BadRequest } from "./Errors.ts"

const formatIssues = SchemaIssue.makeFormatterStandardSchemaV1()

/** `password: Expected a value with a length between 8 and 128; role: ...` */
export const issuesLine = (error: Schema.SchemaError): string =>
  formatIssues(error.issue).issues
    .map((issue) => `${(issue.path ?? []).join(".") || "body"}: ${issue.message}`)
    .join("; ")

// A class, not a plain struct: a struct would match (and answer as 400) any undeclared error
// that happens to have an `error` string.
export class ValidationErrors extends HttpApiMiddleware.Service<ValidationErrors>()("plinth/ValidationErrors", {
  error: BadRequest
}) {}

const kindLabel = { Params: "path", Headers: "headers", Query: "query", Payload: "body", Body: "body", ResponseHeaders: "headers" } as const

export const ValidationErrorsLive = HttpApiMiddleware.layerSchemaErrorTransform(ValidationErrors, (error) =>
  Effect.succeed(
    error.kind === "Body" || error.kind === "ResponseHeaders"
      // Our own response failed its schema: a bug, not the caller's fault.
      ? HttpServerResponse.jsonUnsafe({ error: "internal server error" }, { status: 500 })
      : HttpServerResponse.jsonUnsafe({ error: `invalid ${kindLabel[error.kind]}: ${issuesLine(error.cause)}` }, { status: 400 })
  ))

/** How deep request JSON may nest: deeper values are not data anyone means to send. */
export const MAX_JSON_DEPTH = 64

const depthWithin = (value: unknown, limit: number): boolean => {
  const stack: Array<readonly [unknown, number]> = [[value, 1]]
  while (stack.length > 0) {
    const [current, depth] = stack.pop()!
    if (typeof current !== "object" || current === null) continue
    if (depth > limit) return false
    for (const child of Array.isArray(current) ? current : Object.values(current)) stack.push([child, depth + 1])
  }
  return true
}

/** A schema check: the value nests at most MAX_JSON_DEPTH levels. */
export const isShallowJson = Schema.makeFilter((value: unknown) =>
  depthWithin(value, MAX_JSON_DEPTH) || `nested deeper than ${MAX_JSON_DEPTH} levels`
)
