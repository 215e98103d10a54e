/**
 * The HTTP machinery both services share, over real HTTP against a real database: health and
 * readiness, the JSON 404, the 1 MiB body limit, malformed JSON, validation messages, request ids
 * and the request log line.
 */
import { Effect, Layer, Schema } from "effect"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { Context, Exit, Scope } from "effect"
import { HttpServer } from "effect/http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { serveHttp } from "../../src/http/HttpServerLive.ts"
import { ValidationErrors, ValidationErrorsLive } from "../../src/http/Validation.ts"
import { inviteAsDatabaseAdmin, verify } from "../support/auth.ts"
import { createTestDatabase, type TestDatabase } from "../support/database.ts"
import { eventually } from "../support/eventually.ts"
import { freePort } from "../support/ports.ts"
import { captureLogs, type RunningService, startService } from "../support/services.ts"

let db: TestDatabase
let main: RunningService
let chat: RunningService

beforeAll(async () => {
  db = await createTestDatabase()
  main = await startService("main", db.mainUrl)
  chat = await startService("chat", db.chatUrl)
})
afterAll(async () => {
  await main?.close()
  await chat?.close()
  await db?.drop()
})

describe("system endpoints", () => {
  it.each(["main", "chat"] as const)("%s: GET /health is 200 {status: ok}", async (which) => {
    const service = which === "main" ? main : chat
    const response = await fetch(`${service.url}/health`)
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toContain("application/json")
    expect(await response.json()).toEqual({ status: "ok" })
  })

  it.each(["main", "chat"] as const)("%s: GET /ready is 200 while the database answers", async (which) => {
    const service = which === "main" ? main : chat
    const response = await fetch(`${service.url}/ready`)
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ status: "ready" })
  })

  it("a body that is not JSON is 415 {error} saying to send JSON, on plain and HttpApi routes alike", async () => {
    const { token } = await verify(main.url, await inviteAsDatabaseAdmin(db, "media-type@plinth.test", "member"))
    for (const [route, headers] of [["/sql", { authorization: `Bearer ${token}` }], ["/auth/magic-link", {}]] as const) {
      const response = await fetch(`${main.url}${route}`, { method: "POST", headers: { ...headers, "content-type": "text/plain" }, body: "{}" })
      expect(response.status).toBe(415)
      expect(response.headers.get("content-type")).toContain("application/json")
      expect(await response.json()).toEqual({ error: "unsupported media type: send JSON (Content-Type: application/json)" })
    }
  })

  it("GET /ready is 503 {error} when the database does not answer", async () => {
    const deadUrl = `postgres://authenticator:x@127.0.0.1:${await freePort()}/nowhere`
    const service = await startService("main", deadUrl)
    try {
      const response = await fetch(`${service.url}/ready`)
      expect(response.status).toBe(503)
      const body = await response.json() as { error: unknown }
      expect(typeof body.error).toBe("string")
      // Liveness does not depend on the database.
      expect((await fetch(`${service.url}/health`)).status).toBe(200)
    } finally {
      await service.close()
    }
  })

  it.each(["main", "chat"] as const)("%s: GET /openapi.json documents the endpoints", async (which) => {
    const service = which === "main" ? main : chat
    const response = await fetch(`${service.url}/openapi.json`)
    expect(response.status).toBe(200)
    const doc = await response.json() as { openapi: string; paths: Record<string, unknown> }
    expect(doc.openapi).toMatch(/^3\./)
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(["/health", "/ready"]))
    // The data plane is served by plain routes (DataRoutes.ts), and documented all the same.
    if (which === "main") expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(["/sql", "/function/{name}", "/"]))
  })
})

describe("error shapes", () => {
  it.each([
    ["GET", "/nope"],
    ["POST", "/nope/deeper?x=1"],
    ["DELETE", "/health/extra"]
  ])("unknown route %s %s is 404 {error: not found}", async (method, path) => {
    const response = await fetch(`${main.url}${path}`, { method })
    expect(response.status).toBe(404)
    expect(response.headers.get("content-type")).toContain("application/json")
    expect(await response.json()).toEqual({ error: "not found" })
  })

  it("every response carries a request id, the caller's when it is sane", async () => {
    const given = await fetch(`${main.url}/health`, { headers: { "x-request-id": "abc-123" } })
    expect(given.headers.get("x-request-id")).toBe("abc-123")
    const insane = await fetch(`${main.url}/health`, { headers: { "x-request-id": "a b\u00e9".repeat(40) } })
    expect(insane.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/)
  })

  it("logs one line per request: method, path without query string, status, duration, request id", async () => {
    await fetch(`${main.url}/nope?token=secret-token-value`, { headers: { "x-request-id": "log-test-1" } })
    // The line is written as the response goes out: wait for it to land.
    const linesOf = () => main.logs.filter((entry) => entry.annotations["requestId"] === "log-test-1")
    expect(await eventually(async () => linesOf().length > 0)).toBe(true)
    const lines = linesOf()
    expect(lines).toHaveLength(1)
    expect(lines[0]!.message).toMatch(/^GET \/nope 404 \d+\.\dms$/)
    expect(lines[0]!.annotations).toMatchObject({ method: "GET", path: "/nope", status: 404 })
    for (const entry of main.logs) expect(JSON.stringify(entry)).not.toContain("secret-token-value")
  })
})

/** A route with a JSON body, served by the same machinery as the services, to exercise body handling. */
class EchoApi extends HttpApi.make("echo").add(
  HttpApiGroup.make("echo").add(HttpApiEndpoint.post("echo", "/echo", {
    payload: Schema.Struct({ text: Schema.String.pipe(Schema.check(Schema.isMaxLength(5))) }),
    success: Schema.Struct({ text: Schema.String })
  }))
).middleware(ValidationErrors) {}

describe("request bodies", () => {
  let url: string
  let scope: Scope.Closeable
  beforeAll(async () => {
    const routes = HttpApiBuilder.layer(EchoApi).pipe(
      Layer.provide(HttpApiBuilder.group(EchoApi, "echo", (handlers) => handlers.handle("echo", ({ payload }) => Effect.succeed(payload)))),
      Layer.provide(ValidationErrorsLive)
    )
    scope = Effect.runSync(Scope.make())
    const served = serveHttp(routes, { host: "127.0.0.1", port: 0, name: "test" }).pipe(Layer.provide(captureLogs([])))
    const context = await Effect.runPromise(Layer.buildWithScope(served, scope))
    const address = Context.get(context, HttpServer.HttpServer).address
    url = `http://127.0.0.1:${address._tag === "UnixPathAddress" ? 0 : address.port}`
  })
  afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)))

  const post = (body: string) => fetch(`${url}/echo`, { method: "POST", headers: { "content-type": "application/json" }, body })

  it("a valid body passes", async () => {
    const response = await post(JSON.stringify({ text: "hi" }))
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ text: "hi" })
  })

  it("a body over 1 MiB is 413 {error}", async () => {
    const response = await post(JSON.stringify({ text: "x".repeat(1024 * 1024 + 10) }))
    expect(response.status).toBe(413)
    expect(await response.json()).toEqual({ error: expect.any(String) })
  })

  it("malformed JSON is 400 {error}", async () => {
    const response = await post("{\"text\": ")
    expect(response.status).toBe(400)
    const body = await response.json() as { error: unknown }
    expect(typeof body.error).toBe("string")
  })

  it("a body that fails its schema is 400 {error} naming the field", async () => {
    const response = await post(JSON.stringify({ text: "far too long" }))
    expect(response.status).toBe(400)
    const body = await response.json() as { error: string }
    expect(body.error).toContain("text")
    expect(Object.keys(body)).toEqual(["error"])
  })
})

describe("request bounds", () => {
  it("headers over 16 KiB are refused with 431", async () => {
    const response = await fetch(`${main.url}/health`, { headers: { "x-large": "a".repeat(20_000) } })
    expect(response.status).toBe(431)
  })
})
