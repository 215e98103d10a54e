/**
 * The data plane of spec §4.4–4.5: POST /sql and POST /function/:name. Served by plain routes
 * (DataRoutes.ts), which decode these payloads; defined here for /openapi.json.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { Authentication } from "./ApiMiddleware.ts"
import { BadRequest, DatabaseErrors, Forbidden, RateLimited, Unavailable } from "./Errors.ts"
import { isShallowJson } from "./JsonDepth.ts"
import { documented } from "./OperationDocs.ts"

/** Bounds of spec's "every untrusted input has a bound" for the caller's SQL. */
export const MAX_SQL_LENGTH = 100_000
export const MAX_PARAMS = 1_000

export const Params = Schema.Array(Schema.Unknown).pipe(Schema.check(Schema.isMaxLength(MAX_PARAMS), isShallowJson))

export const SqlPayload = Schema.Struct({
  sql: Schema.String.pipe(Schema.check(Schema.isMinLength(1), Schema.isMaxLength(MAX_SQL_LENGTH))),
  params: Schema.optionalKey(Params),
  /** One SELECT that writes nothing, run in a read-only transaction (a page's queries: docs/pages.md). */
  readOnly: Schema.optionalKey(Schema.Boolean)
})

export const SqlResultBody = Schema.Struct({
  /** One object per row, keyed by column name. */
  rows: Schema.Array(Schema.Record(Schema.String, Schema.Unknown)),
  rowCount: Schema.Int
})

export class DataApi extends HttpApiGroup.make("data")
  .add(HttpApiEndpoint.post("sql", "/sql", {
    payload: SqlPayload,
    success: SqlResultBody,
    // Database errors answer for themselves (databaseErrorResponse): the §7 status and shape 2.
    error: [BadRequest, Forbidden, RateLimited, Unavailable, ...DatabaseErrors]
  }).annotateMerge(documented({
    summary: "Run one SQL statement as the caller",
    description: "One SELECT, INSERT, UPDATE or DELETE with positional `params` ($1, $2, …), in a transaction as the caller " +
      "(the JWT's role and user, the app of `X-App-Schema`, SQL_TIMEOUT). The database's refusal answers in shape 2 " +
      "with the status of its SQLSTATE; a statement refused before the database (not allowed, too large a result) in shape 1. " +
      "`readOnly: true` runs one SELECT (no writing WITH, no sys call) in a read-only transaction, as the console runs page queries. " +
      "A page source passed to sys.create_page or sys.update_page is checked against the page format first: 400 names the block. " +
      "429: the caller has too many statements running, or too many page sources are being checked at once.",
    appSchema: true
  })))
  .add(HttpApiEndpoint.post("function", "/function/:name", {
    params: { name: Schema.String },
    payload: Params,
    success: SqlResultBody,
    error: [BadRequest, Forbidden, RateLimited, Unavailable, ...DatabaseErrors]
  }).annotateMerge(documented({
    summary: "Call a function as the caller",
    description: "`SELECT * FROM <name>($1, …)` with the body's positional arguments, run as POST /sql runs. `name` is " +
      "`function` or `schema.function`; 400 for another name, 403 for functions of sys, pg_catalog, information_schema and refused ones.",
    appSchema: true
  })))
  .middleware(Authentication)
{}
