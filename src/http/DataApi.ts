/**
 * The data plane of spec §4.4–4.5: POST /sql and POST /function/:name. Served by plain routes
 * (DataRoutes.ts), which decode these payloads; defined here for /openapi.json.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { Authentication } from "./ApiMiddleware.ts"
import { BadRequest, Forbidden, TooManyRequests, Unavailable } from "./Errors.ts"
import { isShallowJson } from "./JsonDepth.ts"

/** Bounds of spec's "every untrusted input has a bound" for the caller's SQL. */
export const MAX_SQL_LENGTH = 100_000
export const MAX_PARAMS = 1_000

export const Params = Schema.Array(Schema.Unknown).pipe(Schema.check(Schema.isMaxLength(MAX_PARAMS), isShallowJson))

export const SqlPayload = Schema.Struct({
  sql: Schema.String.pipe(Schema.check(Schema.isMinLength(1), Schema.isMaxLength(MAX_SQL_LENGTH))),
  params: Schema.optionalKey(Params)
})

export const SqlResultBody = Schema.Struct({
  rows: Schema.Array(Schema.Record(Schema.String, Schema.Unknown)),
  rowCount: Schema.Int
})

export class DataApi extends HttpApiGroup.make("data")
  .add(HttpApiEndpoint.post("sql", "/sql", {
    payload: SqlPayload,
    success: SqlResultBody,
    // Database errors answer for themselves (DatabaseFailure): the §7 status and shape 2.
    error: [BadRequest, Forbidden, TooManyRequests, Unavailable]
  }))
  .add(HttpApiEndpoint.post("function", "/function/:name", {
    params: { name: Schema.String },
    payload: Params,
    success: SqlResultBody,
    error: [BadRequest, Forbidden, TooManyRequests, Unavailable]
  }))
  .middleware(Authentication)
{}
