/**
 * Two of the servers issue #8 names for `sql-read`, built as their description says: a
 * hand-written Fastify + postgres.js + jose server answering POST /sql as Plinth does for these
 * statements (no SQL guard, limits, logging or error shapes), and the same server "with one round
 * trip and cached JWTs".
 *
 * - plain: the JWT verified on every request, and the transaction the way postgres.js writes one
 *   (`sql.begin`): BEGIN, the settings statement, the statement and COMMIT, each awaited.
 * - one round trip: JWTs verified once and cached by token, and the four statements queued
 *   together on a reserved connection, which postgres.js pipelines into one write.
 */
import Fastify from "fastify"
import { jwtVerify } from "jose"
import type { AddressInfo } from "node:net"
import postgres from "postgres"
import { type RequestIdentity, SETTINGS_STATEMENT, settingsOf } from "../src/services/RequestContext.ts"
import type { ComparatorServer } from "./support.ts"

interface SqlBody {
  readonly sql: string
  readonly params: ReadonlyArray<unknown>
}

export const startFastify = async (
  databaseUrl: string,
  jwtSecret: string,
  connections: number,
  options: { readonly oneRoundTrip: boolean }
): Promise<ComparatorServer> => {
  // Notices would go to stdout, which is the bench's report.
  const sql = postgres(databaseUrl, { max: connections, prepare: true, onnotice: () => {} })
  const key = new TextEncoder().encode(jwtSecret)
  const verified = new Map<string, RequestIdentity>()
  const caller = async (authorization: string | undefined): Promise<RequestIdentity> => {
    const token = authorization?.slice("Bearer ".length) ?? ""
    const known = options.oneRoundTrip ? verified.get(token) : undefined
    if (known !== undefined) return known
    const { payload } = await jwtVerify(token, key, { algorithms: ["HS256"] })
    const identity = { role: payload["role"], userId: String(payload.sub) } as RequestIdentity
    if (options.oneRoundTrip) verified.set(token, identity)
    return identity
  }
  const transaction = async (identity: RequestIdentity, text: string, params: Array<string>) => {
    if (!options.oneRoundTrip) {
      return sql.begin(async (tx) => {
        await tx.unsafe(SETTINGS_STATEMENT, [...settingsOf(identity)])
        return tx.unsafe(text, params)
      })
    }
    const reserved = await sql.reserve()
    try {
      const [, , rows] = await Promise.all([
        reserved.unsafe("BEGIN"),
        reserved.unsafe(SETTINGS_STATEMENT, [...settingsOf(identity)]),
        reserved.unsafe(text, params),
        reserved.unsafe("COMMIT")
      ])
      return rows
    } finally {
      reserved.release()
    }
  }

  const app = Fastify({ logger: false })
  app.post<{ Body: SqlBody }>("/sql", async (request, reply) => {
    const identity = await caller(request.headers.authorization)
    const rows = await transaction(identity, request.body.sql, request.body.params.map(String))
    return reply.type("application/json").send(JSON.stringify({ rows: [...rows], rowCount: rows.count }))
  })
  await app.listen({ host: "127.0.0.1", port: 0 })
  return {
    url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
    close: async () => {
      await app.close()
      await sql.end({ timeout: 1 })
    }
  }
}
