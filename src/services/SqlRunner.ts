/**
 * Runs one guarded statement for a caller: in the request transaction (RequestContext), with the
 * request's JSON values as bind parameters, and with the result written straight to JSON text
 * as the rows stream in, so that a result over the size limit fails early instead of filling
 * memory.
 */
import { PgTypes } from "@effect/sql-pg"
import { Effect, Schema, Stream } from "effect"
import { SqlClient } from "effect/sql"
import { asRequest, type RequestContext } from "./RequestContext.ts"
import type { GuardedStatement } from "./SqlGuard.ts"

export class ResponseTooLarge extends Schema.TaggedError<ResponseTooLarge>()("ResponseTooLarge", {
  limitBytes: Schema.Number
}) {}

/** The result, its rows already JSON text (`[{...},...]`): serialised once, on the way in. */
export interface StatementResult {
  readonly rowsJson: string
  readonly rowCount: number
}

/**
 * JSON → bind parameter. Scalars go as untyped text, so PostgreSQL infers each parameter's type
 * from where it is used (a number can fill an integer, numeric or text column alike, without
 * losing digits); objects and arrays go as `json`.
 */
export const toParameter = (value: unknown): unknown => {
  if (value === null || value === undefined) return null
  if (typeof value === "string") return value
  if (typeof value === "number" || typeof value === "boolean") return String(value)
  return PgTypes.json(value)
}

/** Runs `text` as `context`; rows stream into JSON text, bounded by `maxResponseBytes`. */
export const runStatement = Effect.fn("SqlRunner.run")(function*(
  context: RequestContext,
  text: string,
  params: ReadonlyArray<unknown>,
  statement: GuardedStatement,
  maxResponseBytes: number
) {
  const sql = yield* SqlClient.SqlClient
  const query = sql.unsafe<Record<string, unknown>>(text, params.map(toParameter))
  if (!statement.returnsRows) {
    // No rows to send, only the count from the command tag.
    const result = yield* asRequest(context, query.raw)
    return { rowsJson: "[]", rowCount: (result as { readonly rowCount: number }).rowCount } satisfies StatementResult
  }
  return yield* asRequest(
    context,
    Effect.suspend(() => {
      const parts: Array<string> = []
      let bytes = 2
      return query.stream.pipe(
        Stream.runForEach((row) => {
          const json = JSON.stringify(row)
          bytes += json.length + 1
          if (bytes > maxResponseBytes) return Effect.fail(new ResponseTooLarge({ limitBytes: maxResponseBytes }))
          parts.push(json)
          return Effect.void
        }),
        Effect.map((): StatementResult => ({ rowsJson: `[${parts.join(",")}]`, rowCount: parts.length }))
      )
    })
  )
})
