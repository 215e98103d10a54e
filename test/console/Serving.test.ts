/**
 * The console on the main service (issue #25): `/` and `/console` lead to `/console/`, its files
 * come with their content types and cache headers (gzipped when asked), every other path under
 * /console/ is its index.html, nothing outside its build is ever served, and config.json tells it
 * this deployment's chat URL, bot-check site key and whether password sign-in exists. APP_URL's
 * default is the console, so magic links land in it.
 */
import { ConfigProvider, Effect } from "effect"
import { request } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { magicLinkUrl } from "../../src/services/Mailer.ts"
import { loadConfig } from "../../src/services/PlinthConfig.ts"
import { ensureConsoleBuilt } from "../support/build.ts"
import { createTestDatabase, type TestDatabase } from "../support/database.ts"
import { type RunningService, startService } from "../support/services.ts"

let db: TestDatabase
let main: RunningService

beforeAll(async () => {
  await ensureConsoleBuilt()
  db = await createTestDatabase()
  main = await startService("main", db.mainUrl, { CHALLENGE_SITE_KEY: "0x4AAAAAAA-site-key", CHAT_URL: "https://chat.example.com" })
}, 120_000)
afterAll(async () => {
  await main?.close()
  await db?.drop()
})

const get = (path: string, headers: Record<string, string> = {}) => fetch(`${main.url}${path}`, { headers, redirect: "manual" })

/** A GET with the path exactly as written (fetch would resolve `..` before sending it). */
const rawGet = (path: string) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    const url = new URL(main.url)
    const outgoing = request({ host: url.hostname, port: url.port, path, method: "GET" }, (response) => {
      let body = ""
      response.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")))
      response.on("end", () => resolve({ status: response.statusCode ?? 0, body }))
    })
    outgoing.on("error", reject)
    outgoing.end()
  })

const scriptOf = (html: string) => html.match(/<script type="module" src="\/console\/(assets\/[^"]+\.js)"/)?.[1]

describe("serving the console", () => {
  it("redirects / and /console to /console/", async () => {
    for (const path of ["/", "/console"]) {
      const response = await get(path)
      expect(response.status).toBe(302)
      expect(response.headers.get("location")).toBe("/console/")
    }
  })

  it("answers /console/ with its index.html, not cached, under a content security policy", async () => {
    const response = await get("/console/")
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("text/html; charset=utf-8")
    expect(response.headers.get("cache-control")).toBe("no-cache")
    expect(response.headers.get("referrer-policy")).toBe("no-referrer")
    const policy = response.headers.get("content-security-policy") ?? ""
    expect(policy).toContain("default-src 'self'")
    expect(policy).toContain("frame-ancestors 'none'")
    // The bot check's script only because a site key is configured here; the chat service may be called.
    expect(policy).toContain("script-src 'self' https://challenges.cloudflare.com")
    expect(policy).toContain("connect-src 'self' https://chat.example.com")
    const html = await response.text()
    expect(html).toContain("<title>Plinth Console</title>")
    expect(scriptOf(html)).toBeDefined()
  })

  it("answers index.html for the console's own routes (the magic link's callback among them)", async () => {
    const index = await (await get("/console/")).text()
    for (const path of ["/console/users", "/console/auth/callback?token=abc", "/console/apps/crm/tables/orders", "/console/index.html"]) {
      const response = await get(path)
      expect(response.status, path).toBe(200)
      expect(response.headers.get("content-type")).toBe("text/html; charset=utf-8")
      expect(await response.text()).toBe(index)
    }
  })

  it("serves the built files with their content types, cached for good, gzipped when the browser takes it", async () => {
    const index = await (await get("/console/")).text()
    const script = scriptOf(index)!
    const style = index.match(/href="\/console\/(assets\/[^"]+\.css)"/)?.[1]
    expect(style).toBeDefined()

    const plain = await get(`/console/${script}`, { "accept-encoding": "identity" })
    expect(plain.status).toBe(200)
    expect(plain.headers.get("content-type")).toBe("text/javascript; charset=utf-8")
    expect(plain.headers.get("cache-control")).toBe("public, max-age=31536000, immutable")
    expect(plain.headers.get("content-encoding")).toBeNull()
    const code = await plain.text()
    expect(code.length).toBeGreaterThan(1000)

    // fetch asks for gzip and unpacks it: the same code arrives.
    const gzipped = await get(`/console/${script}`)
    expect(gzipped.headers.get("content-encoding")).toBe("gzip")
    expect(gzipped.headers.get("vary")).toContain("accept-encoding")
    expect(await gzipped.text()).toBe(code)

    const css = await get(`/console/${style}`)
    expect(css.headers.get("content-type")).toBe("text/css; charset=utf-8")
  })

  it("answers 404 for a file the build does not have", async () => {
    for (const path of ["/console/assets/missing.js", "/console/favicon.ico", "/console/.inputs.json", "/console/assets/.hidden.js"]) {
      const response = await get(path)
      expect(response.status, path).toBe(404)
      expect(await response.json()).toEqual({ error: "not found" })
    }
  })

  it("never serves a file outside its build, however the path is written", async () => {
    for (
      const path of [
        "/console/../package.json",
        "/console/assets/../../../package.json",
        "/console/%2e%2e/%2e%2e/package.json",
        "/console/assets/..%2f..%2f..%2fpackage.json",
        "/console/..%5c..%5cpackage.json",
        "/console/assets%2f..%2f..%2f..%2fpackage.json",
        "/console/%00.js",
        "/console/%E0%A4%A.js"
      ]
    ) {
      const response = await rawGet(path)
      expect([400, 404], path).toContain(response.status)
      expect(response.body, path).not.toContain("\"name\": \"plinth\"")
      expect(JSON.parse(response.body), path).toHaveProperty("error")
    }
  })

  it("tells the console this deployment's settings in config.json", async () => {
    const response = await get("/console/config.json")
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("application/json")
    expect(response.headers.get("cache-control")).toBe("no-store")
    expect(await response.json()).toEqual({
      chatUrl: "https://chat.example.com",
      challengeSiteKey: "0x4AAAAAAA-site-key",
      // Outside production (here NODE_ENV=test) POST /auth/login exists.
      passwordSignIn: true,
      multiTenant: false
    })
  })
})

describe("in multi-tenant mode", () => {
  it("serves the console without X-Tenant (its files are every tenant's), while the API still asks for it", async () => {
    const tenanted = await startService("main", db.mainUrl, { MULTI_TENANT: "true" })
    try {
      const page = await fetch(`${tenanted.url}/console/users`)
      expect(page.status).toBe(200)
      expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8")
      expect(await (await fetch(`${tenanted.url}/console/config.json`)).json()).toMatchObject({ multiTenant: true })
      expect((await fetch(`${tenanted.url}/`, { method: "POST", body: "{}" })).status).toBe(400)
    } finally {
      await tenanted.close()
    }
  })
})

describe("APP_URL", () => {
  const load = async (env: Record<string, string>) => {
    const result = await Effect.runPromise(Effect.result(loadConfig.pipe(Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env }))))))
    if (result._tag === "Failure") throw new Error(result.failure.message)
    return result.success
  }

  it("defaults to the console of this main service, so that magic links open it", async () => {
    const config = await load({})
    expect(config.appUrl.href).toBe("http://127.0.0.1:3000/console")
    expect(magicLinkUrl(config.appUrl, "abc")).toBe("http://127.0.0.1:3000/console/auth/callback?token=abc")
    expect((await load({ HOST: "0.0.0.0", PORT: "8080" })).appUrl.href).toBe("http://localhost:8080/console")
    expect((await load({ HOST: "::1", PORT: "8080" })).appUrl.href).toBe("http://[::1]:8080/console")
    expect((await load({ APP_URL: "https://app.example.com" })).appUrl.href).toBe("https://app.example.com/")
  })

  it("makes the console's origin one CORS allows by default, and the chat URL HOST:CHAT_PORT", async () => {
    const config = await load({ NODE_ENV: "production", JWT_SECRET: "x".repeat(32), HOST: "10.0.0.5", PORT: "8080", CHAT_PORT: "8081" })
    expect(config.corsOrigins).toEqual(["http://10.0.0.5:8080"])
    expect(config.chatUrl.href).toBe("http://10.0.0.5:8081/")
  })
})
