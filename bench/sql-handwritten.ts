/**
 * A leaner comparator for `sql-read` / `sql-write` than the three servers issue #8 names: a
 * hand-written server doing what POST /sql does for these statements, with the optimisations
 * Plinth has (the transaction in one pipelined round trip, JWTs verified once and cached) and
 * nothing else: node:http, jose and Plinth's own driver (@effect/sql-pg, one request per
 * connection at a time); no framework, SQL guard, limits, logging or error shapes. What Plinth
 * costs over it is the price of all of those.
 */
import { PgPool } from "@effect/sql-pg"
import { Effect, Exit, Redacted, Scope } from "effect"
import { jwtVerify } from "jose"
import { createServer } from "node:http"
import { makeJsonColumnTypes } from "../src/services/JsonColumnTypes.ts"
import { type RequestIdentity, SETTINGS_STATEMENT, settingsOf } from "../src/services/RequestContext.ts"
import { type ComparatorServer, listenComparator } from "./support.ts"

export const startHandwritten = async (databaseUrl: string, jwtSecret: string, connections: number): Promise<ComparatorServer> => {
  const scope = Effect.runSync(Scope.make())
  const pool = await Effect.runPromise(Scope.provide(scope)(PgPool.make({
    url: Redacted.make(databaseUrl),
    maxConnections: connections,
    multiplex: true,
    multiplexConcurrency: 1,
    types: makeJsonColumnTypes()
  })))
  const key = new TextEncoder().encode(jwtSecret)
  const verified = new Map<string, RequestIdentity>()
  const caller = async (authorization: string | undefined) => {
    const token = authorization?.slice("Bearer ".length) ?? ""
    const known = verified.get(token)
    if (known !== undefined) return known
    const { payload } = await jwtVerify(token, key, { algorithms: ["HS256"] })
    const identity = { role: payload["role"], userId: String(payload.sub) } as RequestIdentity
    verified.set(token, identity)
    return identity
  }
  // BEGIN, the settings, the statement and COMMIT queued together: one write, one round trip.
  const transaction = (identity: RequestIdentity, sql: string, params: ReadonlyArray<unknown>) =>
    Effect.scoped(Effect.flatMap(pool.get, (connection) =>
      Effect.all([
        connection.query("BEGIN"),
        connection.query(SETTINGS_STATEMENT, settingsOf(identity)),
        connection.query(sql, params.map(String)),
        connection.query("COMMIT")
      ], { concurrency: "unbounded" })))

  const server = createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { sql: string; params: ReadonlyArray<unknown> }
      caller(request.headers.authorization)
        .then((identity) => Effect.runPromise(transaction(identity, body.sql, body.params)))
        .then(([, , result]) => {
          response.writeHead(200, { "content-type": "application/json" })
          response.end(JSON.stringify({ rows: result!.rows, rowCount: result!.rowCount }))
        }, (error: unknown) => {
          response.writeHead(500, { "content-type": "application/json" })
          response.end(JSON.stringify({ error: String(error) }))
        })
    })
  })
  return listenComparator(server, () => Effect.runPromise(Scope.close(scope, Exit.void)))
}
