/**
 * RATE_LIMIT_STORE=postgres: three main-service replicas on one database count the same
 * requests, so a mailbox's fourth magic-link request is refused whichever replica it reaches.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { post } from "../support/auth.ts"
import { createTestDatabase, query, type TestDatabase } from "../support/database.ts"
import { type RunningService, startService } from "../support/services.ts"

let db: TestDatabase
let replicas: Array<RunningService>

beforeAll(async () => {
  db = await createTestDatabase()
  replicas = await Promise.all([0, 1, 2].map(() => startService("main", db.mainUrl, { RATE_LIMIT_STORE: "postgres" })))
})
afterAll(async () => {
  for (const replica of replicas ?? []) await replica.close()
  await db?.drop()
})

const requestLink = (replica: RunningService, email: string, address: string) =>
  post(replica.url, "/auth/magic-link", { email }, { headers: { "cf-connecting-ip": address } })

describe("shared rate limits", () => {
  it("a mailbox's 4th request is 429 on whichever replica it lands", async () => {
    for (const [index, replica] of replicas.entries()) {
      expect((await requestLink(replica, "shared@plinth.test", `198.51.100.${index}`)).status).toBe(200)
    }
    for (const replica of replicas) {
      const refused = await requestLink(replica, "Sha.red+x@plinth.test", "198.51.100.9")
      expect(refused.status).toBe(429)
      const retryAfter = Number(refused.headers.get("retry-after"))
      expect(retryAfter).toBeGreaterThan(0)
      expect(retryAfter).toBeLessThanOrEqual(900)
    }
  })

  it("of 12 concurrent requests for one mailbox spread over the replicas, exactly 3 are admitted", async () => {
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) =>
      requestLink(replicas[i % 3]!, "race@plinth.test", `203.0.113.${i}`)))
    const statuses = answers.map((answer) => answer.status).sort()
    expect(statuses.filter((status) => status === 200)).toHaveLength(3)
    expect(statuses.filter((status) => status === 429)).toHaveLength(9)
  })

  it("10 per client address, across replicas", async () => {
    const statuses: Array<number> = []
    for (let i = 0; i < 11; i++) statuses.push((await requestLink(replicas[i % 3]!, `addr${i}@plinth.test`, "192.0.2.77")).status)
    expect(statuses.slice(0, 10).every((status) => status === 200)).toBe(true)
    expect(statuses[10]).toBe(429)
  })

  it("keeps the counts in plinth.rate_limit_hits, out of every app role's reach", async () => {
    const rows = await query(db.adminUrl, (sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM plinth.rate_limit_hits`)
    expect(rows[0]!.n).toBeGreaterThan(0)
    for (const role of ["owner", "admin", "staff", "member", "anon"]) {
      const [can] = await query(db.adminUrl, (sql) =>
        sql<{ select: boolean; execute: boolean }>`SELECT has_table_privilege(${role}, 'plinth.rate_limit_hits', 'SELECT') AS select,
          has_function_privilege(${role}, 'plinth.rate_limit_check(text[], integer[], integer[])', 'EXECUTE') AS execute`)
      expect(can).toEqual({ select: false, execute: false })
    }
  })
})
