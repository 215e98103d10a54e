/**
 * CORS on both services (issue #21): CORS_ORIGINS and its defaults, the preflight of every path,
 * the headers of normal, error and streamed responses to an allowed origin, and nothing at all for
 * an origin that is not allowed.
 */
import { ConfigProvider, Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeCorsPolicy } from "../../src/http/Cors.ts"
import { loadConfig } from "../../src/services/PlinthConfig.ts"
import { APP_URL, post, type SignIn, signedIn } from "../support/auth.ts"
import { type ChatStack, newConversation, startChatStack } from "../support/chat.ts"
import { createTestDatabase, type TestDatabase } from "../support/database.ts"
import { type RunningService, startService } from "../support/services.ts"

const load = (env: Record<string, string>) =>
  Effect.runPromise(Effect.result(loadConfig.pipe(Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env }))))))
const originsOf = async (env: Record<string, string>) => {
  const result = await load(env)
  if (result._tag === "Failure") throw new Error(result.failure.message)
  return result.success.corsOrigins
}
const errorOf = async (env: Record<string, string>) => {
  const result = await load(env)
  if (result._tag === "Success") throw new Error("expected a configuration error")
  return result.failure.message
}
const PRODUCTION = { NODE_ENV: "production", JWT_SECRET: "x".repeat(32) }

describe("CORS_ORIGINS", () => {
  it("defaults to APP_URL's origin, plus any port of localhost and 127.0.0.1 in development", async () => {
    expect(await originsOf({})).toEqual(["http://127.0.0.1:3000", "http://localhost:*", "http://127.0.0.1:*"])
    expect(await originsOf({ APP_URL: "https://app.example.com/base/" })).toEqual(["https://app.example.com", "http://localhost:*", "http://127.0.0.1:*"])
    expect(await originsOf({ ...PRODUCTION, APP_URL: "https://app.example.com" })).toEqual(["https://app.example.com"])
    expect(await originsOf({ NODE_ENV: "test", APP_URL: "http://app.test:8080" })).toEqual(["http://app.test:8080"])
  })

  it("reads a comma-separated list of origins, kept as browsers write them", async () => {
    expect(await originsOf({ CORS_ORIGINS: " https://App.Example.com/ , http://localhost:*,https://b.example.com:443,http://10.0.0.2:8080" })).toEqual([
      "https://app.example.com",
      "http://localhost:*",
      "https://b.example.com",
      "http://10.0.0.2:8080"
    ])
    expect(await originsOf({ ...PRODUCTION, CORS_ORIGINS: "https://app.example.com" })).toEqual(["https://app.example.com"])
  })

  it("takes * outside production", async () => {
    expect(await originsOf({ CORS_ORIGINS: "*" })).toEqual(["*"])
    expect(await originsOf({ NODE_ENV: "test", CORS_ORIGINS: "*" })).toEqual(["*"])
  })

  it("production with * stops start-up in one line naming the variable", async () => {
    const message = await errorOf({ ...PRODUCTION, CORS_ORIGINS: "https://app.example.com,*" })
    expect(message).toBe("invalid configuration: CORS_ORIGINS: * is not allowed when NODE_ENV=production; list the origins of your web apps")
  })

  it.each(["https://app.example.com/path", "app.example.com", "ftp://files.example.com", "https://u:p@a.example.com", "http://localhost:3000:*", "https://a.example.com?x=1", "null"])(
    "refuses %j in one line naming the variable",
    async (entry) => {
      const message = await errorOf({ CORS_ORIGINS: `https://ok.example.com,${entry}` })
      expect(message).toMatch(/^invalid configuration: CORS_ORIGINS: Expected comma-separated origins .*; not an origin: "/)
      expect(message).not.toContain("\n")
    }
  )
})

describe("the policy", () => {
  const policy = makeCorsPolicy(["https://app.example.com", "http://localhost:*"])

  it("allows the listed origins and any port of a `:*` entry, and nothing like them", () => {
    for (const origin of ["https://app.example.com", "http://localhost", "http://localhost:5173", "http://localhost:65535"]) {
      expect(policy.headers(origin)["access-control-allow-origin"]).toBe(origin)
    }
    for (const origin of ["http://app.example.com", "https://app.example.com:8443", "https://evil.app.example.com", "http://localhost.evil.com", "https://localhost:5173", "http://localhost:5173/", "http://localhost:x", "null"]) {
      expect(policy.headers(origin)).toEqual({ vary: "Origin" })
      expect(policy.preflight(origin)).toEqual({ vary: "Origin" })
      expect(policy.headLines(origin)).toBe("vary: Origin\r\n")
    }
    expect(policy.headLines(undefined)).toBe("")
  })

  it("with * allows every page, answering * (no origin written back)", () => {
    const any = makeCorsPolicy(["*"])
    expect(any.headers("https://anything.example")["access-control-allow-origin"]).toBe("*")
    expect(any.headers("null")["access-control-allow-origin"]).toBe("*")
  })
})

// ---------------------------------------------------------------------------------------------
// Over HTTP

/** CORS_ORIGINS unset: the origin of the tests' APP_URL is the one allowed (NODE_ENV=test). */
const ALLOWED = APP_URL
const DISALLOWED = "https://elsewhere.test"

let stack: ChatStack
let owner: SignIn

beforeAll(async () => {
  stack = await startChatStack()
  owner = await signedIn(stack, "cors-owner@plinth.test", "owner")
}, 60_000)
afterAll(async () => {
  await stack?.close()
})

const corsHeadersOf = (headers: Headers) => [...headers.keys()].filter((name) => name.startsWith("access-control-"))

const expectAllowed = (headers: Headers, origin = ALLOWED) => {
  expect(headers.get("access-control-allow-origin")).toBe(origin)
  expect(headers.get("access-control-expose-headers")).toBe("X-Request-Id, Retry-After")
  expect(headers.get("vary")).toBe("Origin")
  expect(headers.get("access-control-allow-credentials")).toBeNull()
}

const preflight = (url: string, origin: string, method = "POST", extra: Record<string, string> = {}) =>
  fetch(url, {
    method: "OPTIONS",
    headers: { origin, "access-control-request-method": method, "access-control-request-headers": "authorization,content-type", ...extra }
  })

describe("preflight", () => {
  it("is 204 with the methods, headers and max age for every path of both services, known or not", async () => {
    const paths: ReadonlyArray<[string, string]> = [
      [`${stack.main.url}/sql`, "POST"],
      [`${stack.main.url}/auth/magic-link/verify`, "POST"],
      [`${stack.main.url}/function/public.anything`, "POST"],
      [`${stack.main.url}/events?token=x`, "GET"],
      [`${stack.main.url}/`, "POST"],
      [`${stack.main.url}/admin/users/00000000-0000-0000-0000-000000000000`, "PATCH"],
      [`${stack.main.url}/no/such/path`, "GET"],
      [`${stack.chat.url}/conversations`, "GET"],
      [`${stack.chat.url}/conversations/00000000-0000-0000-0000-000000000000/chat`, "POST"],
      [`${stack.chat.url}/conversations/00000000-0000-0000-0000-000000000000`, "DELETE"]
    ]
    for (const [url, method] of paths) {
      const response = await preflight(url, ALLOWED, method)
      expect(response.status, url).toBe(204)
      expect(response.headers.get("access-control-allow-origin")).toBe(ALLOWED)
      expect(response.headers.get("access-control-allow-methods")).toBe("GET, POST, PATCH, DELETE")
      expect(response.headers.get("access-control-allow-headers")).toBe("Authorization, Content-Type, X-App-Schema, X-Tenant, X-Request-Id")
      expect(Number(response.headers.get("access-control-max-age"))).toBeGreaterThan(0)
      expect(response.headers.get("vary")).toBe("Origin")
      expect(response.headers.get("x-request-id")).not.toBeNull()
      expect(await response.text()).toBe("")
    }
  })

  it("from an origin that is not allowed carries no CORS header", async () => {
    for (const url of [`${stack.main.url}/sql`, `${stack.chat.url}/conversations`]) {
      const response = await preflight(url, DISALLOWED)
      expect(corsHeadersOf(response.headers)).toEqual([])
    }
  })

  it("an OPTIONS that is no preflight is an unknown route, as before", async () => {
    const response = await fetch(`${stack.main.url}/sql`, { method: "OPTIONS" })
    expect(response.status).toBe(404)
    expect(corsHeadersOf(response.headers)).toEqual([])
  })
})

describe("responses to an allowed origin", () => {
  it("carry Access-Control-Allow-Origin, Vary and the exposed headers: successes and errors alike", async () => {
    const origin = { origin: ALLOWED }
    const ok = await post(stack.main.url, "/sql", { sql: "SELECT 1 AS one" }, { token: owner.token, headers: origin })
    expect(ok.status).toBe(200)
    expectAllowed(ok.headers)
    const unauthorized = await post(stack.main.url, "/sql", { sql: "SELECT 1" }, { headers: origin })
    expect(unauthorized.status).toBe(401)
    expectAllowed(unauthorized.headers)
    const databaseError = await post(stack.main.url, "/sql", { sql: "SELECT * FROM no_such_table" }, { token: owner.token, headers: origin })
    expect(databaseError.status).toBe(400)
    expect(databaseError.body).toMatchObject({ error: { code: "42P01" } })
    expectAllowed(databaseError.headers)
    const notFound = await fetch(`${stack.main.url}/no/such/path`, { headers: origin })
    expect(notFound.status).toBe(404)
    expectAllowed(notFound.headers)
    const malformed = await post(stack.main.url, "/auth/magic-link/verify", "{", { headers: origin })
    expect(malformed.status).toBe(400)
    expectAllowed(malformed.headers)
    const chatUnauthorized = await fetch(`${stack.chat.url}/conversations`, { headers: origin })
    expect(chatUnauthorized.status).toBe(401)
    expectAllowed(chatUnauthorized.headers)
  })

  it("a 429 too, with its Retry-After readable by the page", async () => {
    const email = "cors-limited@plinth.test"
    let last: Awaited<ReturnType<typeof post>> | undefined
    for (let i = 0; i < 4; i++) last = await post(stack.main.url, "/auth/magic-link", { email }, { headers: { origin: ALLOWED } })
    expect(last!.status).toBe(429)
    expectAllowed(last!.headers)
    expect(last!.headers.get("retry-after")).not.toBeNull()
  })

  it("GET /events (a head written by hand) carries them", async () => {
    const controller = new AbortController()
    const response = await fetch(`${stack.main.url}/events?token=${owner.token}`, { headers: { origin: ALLOWED }, signal: controller.signal })
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("text/event-stream")
    expectAllowed(response.headers)
    controller.abort()
  })

  it("a chat reply's stream carries them", async () => {
    const id = await newConversation(stack, owner.token)
    const response = await fetch(`${stack.chat.url}/conversations/${id}/chat`, {
      method: "POST",
      headers: { origin: ALLOWED, authorization: `Bearer ${owner.token}`, "content-type": "application/json" },
      body: JSON.stringify({ content: "hello" })
    })
    expect(response.headers.get("content-type")).toContain("text/event-stream")
    expectAllowed(response.headers)
    expect(await response.text()).toContain("event: done")
  })
})

describe("an origin that is not allowed", () => {
  it("gets no CORS header on any response, and nothing is logged above info", async () => {
    const origin = { origin: DISALLOWED }
    const before = stack.main.logs.length
    const ok = await post(stack.main.url, "/sql", { sql: "SELECT 1 AS one" }, { token: owner.token, headers: origin })
    expect(ok.status).toBe(200)
    expect(corsHeadersOf(ok.headers)).toEqual([])
    const unauthorized = await post(stack.main.url, "/sql", { sql: "SELECT 1" }, { headers: origin })
    expect(corsHeadersOf(unauthorized.headers)).toEqual([])
    const controller = new AbortController()
    const events = await fetch(`${stack.main.url}/events?token=${owner.token}`, { headers: origin, signal: controller.signal })
    expect(events.status).toBe(200)
    expect(corsHeadersOf(events.headers)).toEqual([])
    controller.abort()
    const chat = await fetch(`${stack.chat.url}/conversations`, { headers: { ...origin, authorization: `Bearer ${owner.token}` } })
    expect(chat.status).toBe(200)
    expect(corsHeadersOf(chat.headers)).toEqual([])
    expect(stack.main.logs.slice(before).filter((entry) => entry.level !== "Info")).toEqual([])
  })

  it("a request without Origin gets no CORS header either", async () => {
    const ok = await post(stack.main.url, "/sql", { sql: "SELECT 1 AS one" }, { token: owner.token })
    expect(corsHeadersOf(ok.headers)).toEqual([])
    expect(ok.headers.get("vary")).toBeNull()
  })
})

describe("other settings", () => {
  let db: TestDatabase
  const services: Array<RunningService> = []
  beforeAll(async () => {
    db = await createTestDatabase()
  })
  afterAll(async () => {
    for (const service of services) await service.close()
    await db?.drop()
  })

  it("* in development lets every page call, answered *", async () => {
    const main = await startService("main", db.mainUrl, { NODE_ENV: "development", CORS_ORIGINS: "*" })
    services.push(main)
    const response = await preflight(`${main.url}/sql`, "https://any.example")
    expect(response.status).toBe(204)
    expect(response.headers.get("access-control-allow-origin")).toBe("*")
    const health = await fetch(`${main.url}/health`, { headers: { origin: "http://localhost:9999" } })
    expectAllowed(health.headers, "*")
  })

  it("development's default allows any port of localhost and 127.0.0.1, and APP_URL's origin", async () => {
    const main = await startService("main", db.mainUrl, { NODE_ENV: "development", APP_URL: "https://app.example.com/x" })
    services.push(main)
    for (const origin of ["http://localhost:5173", "http://127.0.0.1:8080", "https://app.example.com"]) {
      expectAllowed((await fetch(`${main.url}/health`, { headers: { origin } })).headers, origin)
    }
    expect(corsHeadersOf((await fetch(`${main.url}/health`, { headers: { origin: "http://example.com:5173" } })).headers)).toEqual([])
  })

  it("multi-tenant: a preflight needs no X-Tenant, a request does (and its 400 is readable)", async () => {
    const main = await startService("main", db.mainUrl, { MULTI_TENANT: "true", CORS_ORIGINS: "http://app.example.com" })
    services.push(main)
    const response = await preflight(`${main.url}/sql`, "http://app.example.com", "POST", { "access-control-request-headers": "authorization,content-type,x-tenant" })
    expect(response.status).toBe(204)
    expect(response.headers.get("access-control-allow-origin")).toBe("http://app.example.com")
    const request = await post(main.url, "/sql", { sql: "SELECT 1" }, { headers: { origin: "http://app.example.com" } })
    expect(request.status).toBe(400)
    expect(request.body).toEqual({ error: "X-Tenant is required" })
    expectAllowed(request.headers, "http://app.example.com")
  })
})
