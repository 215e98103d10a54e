/**
 * Handlers of POST /sql and POST /function/:name: the caller's statement passes the SQL guard,
 * then runs in a transaction as the caller (role, user, app, timeout), and its failure comes
 * back in the structured shape of spec §7.
 */
import { Effect, Option } from "effect"
import type { HttpServerRequest } from "effect/http"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import type { SqlError } from "effect/sql"
import { databaseErrorFields } from "../services/DatabaseError.ts"
import { PlinthConfig } from "../services/PlinthConfig.ts"
import { isDeniedFunction, SqlGuard } from "../services/SqlGuard.ts"
import type { SqlParseError } from "../services/SqlParser.ts"
import { quoteIdentifier } from "../services/SqlIdentifier.ts"
import { type ResponseTooLarge, runStatement, type StatementResult, type UnsupportedResult } from "../services/SqlRunner.ts"
import { CurrentPrincipal } from "./Authentication.ts"
import { BadRequest, databaseErrorResponse, Forbidden, Unavailable } from "./Errors.ts"
import { MainApi } from "./MainApi.ts"
import { resolveRequestContext } from "./RequestContextResolver.ts"

/** `schema.name` or `name`, each an unquoted-style identifier PostgreSQL would accept. */
const FUNCTION_NAME = /^(?:([A-Za-z_][A-Za-z0-9_]{0,62})\.)?([A-Za-z_][A-Za-z0-9_]{0,62})$/
/** Reached through POST /sql (sys) or not at all (the catalogs). */
const BLOCKED_SCHEMAS = new Set(["sys", "pg_catalog", "information_schema", "plinth", "extensions"])

/**
 * The name as the client sent it: the router ends a path at `;` (matrix parameters), so
 * `/function/a;b` would otherwise reach us as `a`.
 */
const rawFunctionName = (request: HttpServerRequest.HttpServerRequest): string | undefined => {
  const path = request.url.split("?")[0] ?? ""
  const prefix = "/function/"
  if (!path.startsWith(prefix)) return undefined
  try {
    return decodeURIComponent(path.slice(prefix.length))
  } catch {
    return path.slice(prefix.length)
  }
}

const respond = (result: StatementResult) =>
  HttpServerResponse.text(`{"rows":${result.rowsJson},"rowCount":${result.rowCount}}`, { contentType: "application/json" })

export const DataHandlers = HttpApiBuilder.group(MainApi, "data", Effect.fn(function*(handlers) {
  const config = yield* PlinthConfig
  const guard = yield* SqlGuard

  /**
   * Database failures are answered here, as responses with their own §7 status: HttpApi would
   * encode a declared error with one fixed status.
   */
  const failures = <R>(
    effect: Effect.Effect<HttpServerResponse.HttpServerResponse, SqlError.SqlError | SqlParseError | ResponseTooLarge | UnsupportedResult | BadRequest | Forbidden, R>
  ) =>
    Effect.catchTags(effect, {
      SqlError: (error) => {
        const fields = databaseErrorFields(error)
        return fields.code === undefined
          ? Effect.fail(new Unavailable({ error: "database unavailable" }))
          : Effect.succeed(databaseErrorResponse(fields, { production: config.isProduction }))
      },
      // The guard parses with PostgreSQL's own parser: its syntax errors are the server's.
      SqlParseError: (error) =>
        Effect.succeed(databaseErrorResponse({ message: error.message, code: "42601", position: error.position ?? undefined }, {
          production: config.isProduction
        })),
      UnsupportedResult: (error) => Effect.fail(new BadRequest({ error: error.message })),
      ResponseTooLarge: (error) =>
        Effect.fail(new BadRequest({ error: `the result is larger than ${error.limitBytes} bytes; select fewer rows or columns` }))
    })

  return handlers
    .handle("sql", ({ payload, request }) =>
      failures(Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        const statement = yield* guard.check(payload.sql).pipe(
          Effect.catchTag("StatementRefused", (refused) => Effect.fail(new BadRequest({ error: refused.message })))
        )
        const params = payload.params ?? []
        if (params.length < statement.parameters) {
          return yield* new BadRequest({ error: `the statement uses $${statement.parameters} but ${params.length} params were given` })
        }
        const context = yield* resolveRequestContext(principal, request)
        const result = yield* runStatement(context, payload.sql, params, statement, config.sqlMaxResponseBytes)
        return respond(result)
      })))
    .handle("function", ({ params, payload, request }) =>
      failures(Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        const match = FUNCTION_NAME.exec(rawFunctionName(request) ?? params.name)
        if (match === null) return yield* new BadRequest({ error: "invalid function name" })
        const [, schema, name] = match
        if (schema !== undefined && BLOCKED_SCHEMAS.has(schema.toLowerCase())) {
          return yield* new Forbidden({ error: `functions of ${schema} cannot be called here` })
        }
        if (isDeniedFunction(name!)) return yield* new Forbidden({ error: `function ${name} is not allowed` })
        const qualified = schema === undefined ? quoteIdentifier(name!) : `${quoteIdentifier(schema)}.${quoteIdentifier(name!)}`
        const placeholders = payload.map((_, index) => `$${index + 1}`).join(", ")
        const context = yield* resolveRequestContext(principal, request)
        const result = yield* runStatement(
          context,
          `SELECT * FROM ${qualified}(${placeholders})`,
          payload,
          { kind: "SELECT", returnsRows: true, parameters: payload.length },
          config.sqlMaxResponseBytes
        )
        return respond(result)
      })))
}))

/**
 * `/function/<name>` that `/function/:name` could not take (a name past the router's length
 * limit, a broken %-escape, an empty name): still an invalid function name, not an unknown route.
 */
export const InvalidFunctionNameRoute = HttpRouter.add(
  "POST",
  "/function/*",
  Effect.succeed(HttpServerResponse.jsonUnsafe({ error: "invalid function name" }, { status: 400 }))
)
