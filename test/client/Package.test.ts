/**
 * `plinth/client` as the package exports it: `npm run build` puts it in dist/ with its declarations,
 * Node resolves `plinth/client` (the package's `exports`, reached here by self-reference) and calls a
 * live service with it, and it bundles for a browser with nothing of Node left in it.
 */
import { execFile } from "node:child_process"
import { existsSync } from "node:fs"
import path from "node:path"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ensureBuilt } from "../support/build.ts"
import { bundleClient, importsLeftIn } from "../support/clientBundle.ts"
import { createTestDatabase, type TestDatabase } from "../support/database.ts"
import { type RunningService, startService } from "../support/services.ts"

const ROOT = path.resolve(import.meta.dirname, "../..")

let db: TestDatabase
let main: RunningService

beforeAll(async () => {
  await ensureBuilt()
  db = await createTestDatabase()
  main = await startService("main", db.mainUrl)
}, 120_000)
afterAll(async () => {
  await main?.close()
  await db?.drop()
})

describe("the built package", () => {
  it("has the client and its declarations where `exports` points", () => {
    expect(existsSync(path.join(ROOT, "dist/src/client/index.js"))).toBe(true)
    expect(existsSync(path.join(ROOT, "dist/src/client/index.d.ts"))).toBe(true)
  })

  it("Node resolves plinth/client and calls a live service with it", async () => {
    const script = `
      const { createPlinthClient, MainApi, Unauthorized } = await import("plinth/client")
      const client = createPlinthClient({ url: process.argv[1], token: "not-a-jwt" })
      const health = await client.run((c) => c.mainApi.system.health())
      const refused = await client.sql("SELECT 1").catch((error) => error instanceof Unauthorized ? error._tag : String(error))
      console.log(JSON.stringify({ health, refused, api: typeof MainApi }))
    `
    const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script, main.url], { cwd: ROOT })
    expect(JSON.parse(stdout)).toEqual({ health: { status: "ok" }, refused: "Unauthorized", api: "function" })
  })
})

describe("the browser bundle", () => {
  it("is one self-contained module: no node: module, nothing left to load", async () => {
    const code = await bundleClient()
    expect(importsLeftIn(code)).toEqual([])
    expect(code).not.toMatch(/from\s*["']node:|require\(\s*["']node:/)
    expect(code).toMatch(/\bcreatePlinthClient\b/)
  })
})
