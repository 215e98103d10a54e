/**
 * RATE_LIMIT_STORE=postgres: three main-service replicas on one database count the same
 * requests, so a mailbox's fourth magic-link request is refused whichever replica it reaches;
 * and a bot-check token is accepted once, whichever replica sees it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { post } from "../support/auth.ts"
import { createTestDatabase, query, type TestDatabase } from "../support/database.ts"
import { type FakeSiteverify, startFakeSiteverify } from "../support/FakeSiteverify.ts"
import { type RunningService, startService } from "../support/services.ts"

let db: TestDatabase
let replicas: Array<RunningService>
let siteverify: FakeSiteverify
let checking: Array<RunningService>

beforeAll(async () => {
  db = await createTestDatabase()
  siteverify = await startFakeSiteverify()
  replicas = await Promise.all([0, 1, 2].map(() => startService("main", db.mainUrl, { RATE_LIMIT_STORE: "postgres" })))
  const challengeEnv = { RATE_LIMIT_STORE: "postgres", CHALLENGE_SECRET: "shared-challenge-secret", CHALLENGE_VERIFY_URL: siteverify.url }
  checking = await Promise.all([0, 1].map(() => startService("main", db.mainUrl, challengeEnv)))
})
afterAll(async () => {
  for (const replica of [...(replicas ?? []), ...(checking ?? [])]) await replica.close()
  await siteverify?.close()
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

describe("shared bot-check claims", () => {
  let address = 0
  const withToken = (replica: RunningService, email: string, token: string) =>
    post(replica.url, "/auth/magic-link", { email, challenge_token: token }, { headers: { "cf-connecting-ip": `192.0.2.${++address}` } })

  it("a token accepted by one replica is a replay (403) on the other, which does not ask the service", async () => {
    const token = `pass-shared-${Date.now()}`
    expect((await withToken(checking[0]!, "claim-a@plinth.test", token)).status).toBe(200)
    const calls = siteverify.calls.length
    const replay = await withToken(checking[1]!, "claim-b@plinth.test", token)
    expect(replay.status).toBe(403)
    expect(replay.body).toEqual({ error: expect.any(String) })
    expect(siteverify.calls.length).toBe(calls)
  })

  it("of 8 concurrent requests with one token over both replicas, exactly one passes", async () => {
    const token = `pass-race-${Date.now()}`
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => withToken(checking[i % 2]!, `race-claim-${i}@plinth.test`, token)))
    const statuses = answers.map((answer) => answer.status).sort()
    expect(statuses).toEqual([200, 403, 403, 403, 403, 403, 403, 403])
  })

  it("keeps only digests in plinth.challenge_claims, out of every app role's reach", async () => {
    const rows = await query(db.adminUrl, (sql) => sql<{ key: string }>`SELECT key FROM plinth.challenge_claims`)
    expect(rows.length).toBeGreaterThanOrEqual(2)
    for (const row of rows) expect(row.key).not.toContain("pass-")
    for (const role of ["owner", "admin", "staff", "member", "anon"]) {
      const [can] = await query(db.adminUrl, (sql) =>
        sql<{ select: boolean; execute: boolean }>`SELECT has_table_privilege(${role}, 'plinth.challenge_claims', 'SELECT') AS select,
          has_function_privilege(${role}, 'plinth.challenge_claim(text, integer)', 'EXECUTE') AS execute`)
      expect(can).toEqual({ select: false, execute: false })
    }
  })
})
