/**
 * The production shape: the built `plinth` (dist/) serving one service against URLs, JSON log
 * lines, and `plinth migrate` with an administrator's URL.
 */
import { spawn } from "node:child_process"
import { chmodSync, readFileSync } from "node:fs"
import path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ensureBuilt } from "../support/build.ts"
import { CLI_BUILT, runPlinth } from "../support/cli.ts"
import { createTestDatabase, query, type TestDatabase } from "../support/database.ts"
import { freePort } from "../support/ports.ts"

const JWT_SECRET = "a-test-secret-that-is-at-least-32-bytes-long"
let db: TestDatabase

beforeAll(async () => {
  await ensureBuilt()
  db = await createTestDatabase()
}, 120_000)
afterAll(() => db?.drop())

const productionEnv = async (extra: Record<string, string>) => ({
  NODE_ENV: "production",
  JWT_SECRET,
  PORT: String(await freePort()),
  CHAT_PORT: String(await freePort()),
  ...extra
})

describe("the built plinth (dist/)", () => {
  it("serve main: health, ready, and one JSON log line per request without the query string", async () => {
    const env = await productionEnv({ DATABASE_URL: db.mainUrl })
    const plinth = runPlinth(["serve", "main"], env, CLI_BUILT)
    try {
      await plinth.waitFor(/Plinth main service: \S+/)
      expect(plinth.stdout()).not.toContain("chat service")
      const base = `http://127.0.0.1:${env.PORT}`
      expect((await fetch(`${base}/health`)).status).toBe(200)
      expect((await fetch(`${base}/ready`)).status).toBe(200)
      await fetch(`${base}/nope?token=never-log-this`, { headers: { "x-request-id": "prod-log-1" } })
      const match = await plinth.waitFor(/^\{.*"prod-log-1".*\}$/m, 5_000)
      const entry = JSON.parse(match[0]) as { message: string; level: string; annotations: Record<string, unknown> }
      expect(entry.level).toBe("INFO")
      expect(entry.message).toMatch(/^GET \/nope 404 \d+\.\dms$/)
      expect(entry.annotations).toMatchObject({ method: "GET", path: "/nope", status: 404, requestId: "prod-log-1" })
      expect(typeof entry.annotations["duration"]).toBe("string")
      expect(plinth.stdout() + plinth.stderr()).not.toContain("never-log-this")
      expect(plinth.stdout() + plinth.stderr()).not.toContain(JWT_SECRET)
    } finally {
      plinth.child.kill("SIGTERM")
      expect(await plinth.exited).toBe(0)
    }
  })

  it("serve chat runs the chat service alone, as chat_authenticator", async () => {
    const env = await productionEnv({ DATABASE_URL: db.mainUrl, CHAT_DATABASE_URL: db.chatUrl })
    const plinth = runPlinth(["serve", "chat"], env, CLI_BUILT)
    try {
      await plinth.waitFor(/Plinth chat service: \S+/)
      expect((await fetch(`http://127.0.0.1:${env.CHAT_PORT}/ready`)).status).toBe(200)
      expect((await fetch(`http://127.0.0.1:${env.PORT}/health`).catch(() => undefined))).toBeUndefined()
    } finally {
      plinth.child.kill("SIGTERM")
      await plinth.exited
    }
  })

  it("serve chat without CHAT_DATABASE_URL names the variable", async () => {
    const plinth = runPlinth(["serve", "chat"], await productionEnv({ DATABASE_URL: db.mainUrl }), CLI_BUILT)
    expect(await plinth.exited).toBe(1)
    expect(plinth.stderr().trim()).toBe("plinth: invalid configuration: CHAT_DATABASE_URL: required when DATABASE_URL is set")
  })

  it("production refuses to start without JWT_SECRET", async () => {
    const env = await productionEnv({ DATABASE_URL: db.mainUrl })
    const plinth = runPlinth(["serve", "main"], { ...env, JWT_SECRET: "" }, CLI_BUILT)
    expect(await plinth.exited).toBe(1)
    expect(plinth.stderr().trim()).toMatch(/^plinth: invalid configuration: JWT_SECRET: /)
  })

  it("migrate applies pending migrations with DATABASE_ADMIN_URL, once", async () => {
    const fresh = await createTestDatabase({ migrated: false })
    try {
      const env = await productionEnv({ DATABASE_URL: fresh.mainUrl, DATABASE_ADMIN_URL: fresh.adminUrl })
      const first = runPlinth(["migrate"], env, CLI_BUILT)
      expect(await first.exited).toBe(0)
      expect(first.stdout()).toContain("applied migrations: 0001_roles_and_sys.sql")
      const second = runPlinth(["migrate"], env, CLI_BUILT)
      expect(await second.exited).toBe(0)
      expect(second.stdout()).toContain("migrations: up to date")
      const rows = await query(fresh.adminUrl, (sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM plinth.schema_migrations`)
      expect(rows[0]!.n).toBeGreaterThan(0)
    } finally {
      await fresh.drop()
    }
  })

  it("runs as a program through its #! line, which gives Node Plinth's flags", async () => {
    expect(readFileSync(CLI_BUILT, "utf8").split("\n")[0]).toBe("#!/usr/bin/env -S node --max-semi-space-size=16 --no-allocation-site-pretenuring")
    chmodSync(CLI_BUILT, 0o755)
    const child = spawn(path.resolve(CLI_BUILT), ["--help"], { stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString("utf8")))
    expect(await new Promise((resolve) => child.on("exit", resolve))).toBe(0)
    expect(out).toMatch(/USAGE/i)
  })

  it("migrate without DATABASE_ADMIN_URL names the variable", async () => {
    const plinth = runPlinth(["migrate"], await productionEnv({ DATABASE_URL: db.mainUrl }), CLI_BUILT)
    expect(await plinth.exited).toBe(1)
    expect(plinth.stderr().trim()).toBe("plinth: invalid configuration: DATABASE_ADMIN_URL: required when DATABASE_URL is set")
  })
})
