/**
 * POST /sql and POST /function/<name>: the caller's statement passes the SQL guard, then runs in
 * a transaction as the caller (role, user, app, timeout), and its failure comes back in the
 * structured shape of spec §7.
 *
 * They are Plinth's hot path, so they are plain router routes, not HttpApi handlers: HttpApi's
 * per-request pipeline (its middleware wrappers, payload decoder and context provision) was a
 * tenth to a fifth of such a request (docs/performance-notes.md). They answer as
 * HttpApi's routes do (401, then 415, then `invalid body: ...`; Validation.ts), and DataApi still
 * defines them for /openapi.json.
 */
import { Effect, Layer, Option } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import type { SqlError } from "effect/sql"
import { AccessTokens, type Principal } from "../services/AccessTokens.ts"
import { databaseErrorFields } from "../services/DatabaseError.ts"
import { PageChecker } from "../services/PageChecker.ts"
import { PlinthConfig } from "../services/PlinthConfig.ts"
import { readOnlyProblem, validatePageSources } from "../services/PageValidation.ts"
import { isDeniedFunction, type PageSourceArgument, SqlGuard } from "../services/SqlGuard.ts"
import type { SqlParseError } from "../services/SqlParser.ts"
import { QUALIFIED_NAME, quoteIdentifier } from "../services/SqlIdentifier.ts"
import { StatementAdmission, type StatementsBusy } from "../services/StatementAdmission.ts"
import { type ResponseTooLarge, SqlRunner, type StatementResult, type UnsupportedResult } from "../services/SqlRunner.ts"
import { authenticate, bearerCredential } from "./Authentication.ts"
import { Params, SqlPayload } from "./DataApi.ts"
import { BadRequest, databaseErrorResponse, Forbidden, TooManyRequests, Unavailable } from "./Errors.ts"
import { resolveRequestContext } from "./RequestContextResolver.ts"
import { CurrentTenant } from "./TenantSelection.ts"
import { jsonBody } from "./Validation.ts"

/** Reached through POST /sql (sys) or not at all (the catalogs). */
const BLOCKED_SCHEMAS = new Set(["sys", "pg_catalog", "information_schema", "plinth", "extensions"])
const FUNCTION_PREFIX = "/function/"
/** A page source waits about one parse deadline for a worker (PageChecker.ts). */
const PAGES_BUSY_RETRY_SECONDS = 2

/** The name as the client sent it, %-escapes decoded (a broken one is left as it came). */
const functionName = (request: HttpServerRequest.HttpServerRequest): string => {
  const raw = (request.url.split("?")[0] ?? "").slice(FUNCTION_PREFIX.length)
  try {
    return decodeURIComponent(raw)
  } catch {
    return raw
  }
}

/** Whose statements a request's counts against (StatementAdmission): the user, within their tenant. */
const admissionKey = (tenant: Option.Option<string>, userId: string) => Option.isNone(tenant) ? userId : `${tenant.value}/${userId}`

const respond = (result: StatementResult) =>
  HttpServerResponse.text(`{"rows":${result.rowsJson},"rowCount":${result.rowCount}}`, { contentType: "application/json" })

export const DataRoutes = Layer.unwrap(Effect.gen(function*() {
  const config = yield* PlinthConfig
  const guard = yield* SqlGuard
  const pages = yield* PageChecker
  const tokens = yield* AccessTokens
  const admission = yield* StatementAdmission
  const runner = yield* SqlRunner
  const sqlBody = jsonBody(SqlPayload)
  const functionBody = jsonBody(Params)
  const caller = (request: HttpServerRequest.HttpServerRequest) => authenticate(tokens, bearerCredential(request.headers.authorization))

  /** How the routes' failures answer: database failures as responses with their own §7 status (one object, not one per request). */
  const failures = {
    SqlError: (error: SqlError.SqlError) => {
      const fields = databaseErrorFields(error)
      return fields.code === undefined
        ? Effect.fail(new Unavailable({ error: "database unavailable" }))
        : Effect.succeed(databaseErrorResponse(fields, { production: config.isProduction }))
    },
    // The guard parses with PostgreSQL's own parser: its syntax errors are the server's.
    SqlParseError: (error: SqlParseError) =>
      Effect.succeed(databaseErrorResponse({ message: error.message, code: "42601", position: error.position ?? undefined }, {
        production: config.isProduction
      })),
    UnsupportedResult: (error: UnsupportedResult) => Effect.fail(new BadRequest({ error: error.message })),
    ResponseTooLarge: (error: ResponseTooLarge) =>
      Effect.fail(new BadRequest({ error: `the result is larger than ${error.limitBytes} bytes; select fewer rows or columns` })),
    StatementsBusy: (error: StatementsBusy) =>
      Effect.fail(new TooManyRequests({
        error: `too many statements at once: at most ${error.limit} of one user run together; try again shortly`,
        retryAfterSeconds: error.retryAfterSeconds
      }))
  }

  /** The route's answer. */
  const answer = <R>(
    effect: Effect.Effect<StatementResult, SqlError.SqlError | SqlParseError | ResponseTooLarge | UnsupportedResult | StatementsBusy | BadRequest | TooManyRequests, R>
  ) => Effect.catchTags(Effect.map(effect, respond), failures)

  const checkPages = (sources: ReadonlyArray<PageSourceArgument>, params: ReadonlyArray<unknown>) =>
    validatePageSources(guard.check, pages.parse, sources, params).pipe(
      Effect.catchTags({
        PageRefused: (refused) => Effect.fail(new BadRequest({ error: refused.message })),
        PagesBusy: (busy) => Effect.fail(new TooManyRequests({ error: busy.message, retryAfterSeconds: PAGES_BUSY_RETRY_SECONDS }))
      })
    )

  // Defined once, not as a generator written inline per request (see the top of this file).
  const guarded = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest, principal: Principal, payload: typeof SqlPayload.Type) {
    const statement = yield* guard.check(payload.sql).pipe(
      Effect.catchTag("StatementRefused", (refused) => Effect.fail(new BadRequest({ error: refused.message })))
    )
    const params = payload.params ?? []
    if (params.length < statement.parameters) {
      return yield* new BadRequest({ error: `the statement uses $${statement.parameters} but ${params.length} params were given` })
    }
    // A page's query, which its viewer runs unread: refused unless it only reads, then read-only in the database too.
    const readOnly = payload.readOnly === true
    const notReading = readOnly ? readOnlyProblem(statement) : undefined
    if (notReading !== undefined) return yield* new BadRequest({ error: `readOnly: ${notReading}` })
    const context = yield* resolveRequestContext(principal, request)
    const run = runner.run(readOnly ? { ...context, readOnly } : context, payload.sql, params, statement, config.sqlMaxResponseBytes)
    return yield* admission.admit(
      admissionKey(yield* CurrentTenant, principal.userId),
      // Checking a page source takes a worker thread: it counts as one of the user's statements.
      statement.pageSources === undefined ? run : Effect.andThen(checkPages(statement.pageSources, params), run)
    )
  })

  const sql = Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const principal = yield* caller(request)
    const payload = yield* sqlBody(request)
    return yield* answer(guarded(request, principal, payload))
  })

  // `/function/*`, not `/function/:name`: the router ends a segment at `;` (matrix parameters),
  // so `/function/a;b` would reach a :name route as `a`; a name past the router's length limit, a
  // broken %-escape or an empty name must still be "invalid function name", not a 404.
  const call = Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const principal = yield* caller(request)
    const args = yield* functionBody(request)
    const match = QUALIFIED_NAME.exec(functionName(request))
    if (match === null) return yield* new BadRequest({ error: "invalid function name" })
    const [, schema, name] = match
    if (schema !== undefined && BLOCKED_SCHEMAS.has(schema.toLowerCase())) {
      return yield* new Forbidden({ error: `functions of ${schema} cannot be called here` })
    }
    if (isDeniedFunction(name!)) return yield* new Forbidden({ error: `function ${name} is not allowed` })
    const qualified = schema === undefined ? quoteIdentifier(name!) : `${quoteIdentifier(schema)}.${quoteIdentifier(name!)}`
    const placeholders = args.map((_, index) => `$${index + 1}`).join(", ")
    const context = yield* resolveRequestContext(principal, request)
    return yield* answer(admission.admit(
      admissionKey(yield* CurrentTenant, principal.userId),
      runner.run(
        context,
        `SELECT * FROM ${qualified}(${placeholders})`,
        args,
        { kind: "SELECT", returnsRows: true, parameters: args.length, callsSys: false, writesInCte: false },
        config.sqlMaxResponseBytes
      )
    ))
  })

  return Layer.mergeAll(HttpRouter.add("POST", "/sql", sql), HttpRouter.add("POST", `${FUNCTION_PREFIX}*`, call))
}))
