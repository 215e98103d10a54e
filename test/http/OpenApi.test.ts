/**
 * Each service's `/openapi.json` documents exactly what it serves: every documented path and
 * method reaches a route (an answer other than the router's own 404), and every route its router
 * holds is documented (`/openapi.json` itself and the catch-all 404 aside).
 */
import { FindMyWay } from "effect/http"
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import { createTestDatabase, type TestDatabase } from "../support/database.ts"
import { type RunningService, startService } from "../support/services.ts"

type Route = readonly [method: string, path: string]

// Every route a router is given is registered through find-my-way's `on`: watched while a service
// starts, its calls are the routes that service's router holds.
const registrations = vi.spyOn(Object.getPrototypeOf(FindMyWay.make()) as { on: (method: string | ReadonlyArray<string>, path: string, handler: unknown) => void }, "on")

const routesOf = (calls: ReadonlyArray<ReadonlyArray<unknown>>): ReadonlyArray<Route> => {
  const routes = calls.flatMap(([method, path]) =>
    (typeof method === "string" ? [method] : method as ReadonlyArray<string>).map((one): Route => [one, path as string]))
  const paths = new Set(routes.map(([, path]) => path))
  // A route `/a/*` is registered as `/a` too, by the router itself.
  return routes.filter(([, path]) => path !== "*" && path !== "/openapi.json" && !paths.has(`${path}/*`))
}

/** A path with its parameters (`{id}`, `:id`, a trailing `*`) made one placeholder, to compare shapes. */
const shape = (path: string) => path.replace(/\{[^}]+\}|:[^/]+|\*$/g, "{}")

interface OpenApiDocument {
  readonly paths: Readonly<Record<string, Readonly<Record<string, unknown>>>>
}

const documented = async (service: RunningService): Promise<ReadonlyArray<Route>> => {
  const response = await fetch(`${service.url}/openapi.json`)
  expect(response.status).toBe(200)
  const document = (await response.json()) as OpenApiDocument
  return Object.entries(document.paths).flatMap(([path, operations]) =>
    Object.keys(operations).filter((key) => /^(get|post|put|patch|delete)$/.test(key)).map((method): Route => [method.toUpperCase(), path]))
}

/** The router's own answer to a path it has no route for. */
const isRoutersNotFound = (status: number, body: unknown) =>
  status === 404 && JSON.stringify(body) === JSON.stringify({ error: "not found" })

const probe = async (service: RunningService, [method, path]: Route) => {
  const url = `${service.url}${path.replace(/\{[^}]+\}/g, "00000000-0000-4000-8000-000000000000")}`
  const withBody = method !== "GET" && method !== "DELETE"
  const response = await fetch(url, { method, ...(withBody ? { headers: { "content-type": "application/json" }, body: "{}" } : {}) })
  const text = await response.text()
  let body: unknown = text
  try {
    body = JSON.parse(text)
  } catch {
    // Not JSON: not the router's 404 either.
  }
  return { status: response.status, body }
}

let db: TestDatabase
const services: Record<"main" | "chat", { service: RunningService; routes: ReadonlyArray<Route> }> = {} as never
beforeAll(async () => {
  db = await createTestDatabase()
  for (const which of ["main", "chat"] as const) {
    registrations.mockClear()
    const service = await startService(which, which === "main" ? db.mainUrl : db.chatUrl)
    services[which] = { service, routes: routesOf(registrations.mock.calls) }
  }
  registrations.mockRestore()
}, 60_000)
afterAll(async () => {
  await services.main?.service.close()
  await services.chat?.service.close()
  await db?.drop()
})

describe.each(["main", "chat"] as const)("the %s service's /openapi.json", (which) => {
  it("documents paths that are served: none is answered by the router's 404", async () => {
    const { service } = services[which]
    const paths = await documented(service)
    expect(paths.length).toBeGreaterThan(3)
    const unknown = await probe(service, ["GET", "/no/such/path"])
    expect(isRoutersNotFound(unknown.status, unknown.body)).toBe(true)
    const unanswered: Array<string> = []
    for (const route of paths) {
      const { status, body } = await probe(service, route)
      if (isRoutersNotFound(status, body)) unanswered.push(route.join(" "))
    }
    expect(unanswered).toEqual([])
  })

  it("documents every route the router holds", async () => {
    const { service, routes } = services[which]
    expect(routes.length).toBeGreaterThan(3)
    const paths = new Set((await documented(service)).map(([method, path]) => `${method} ${shape(path)}`))
    const undocumented = routes.filter(([method, path]) => !paths.has(`${method} ${shape(path)}`)).map((route) => route.join(" "))
    expect(undocumented).toEqual([])
  })
})
