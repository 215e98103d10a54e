/**
 * Multi-tenant mode against a real server: tenants created with `plinth tenant create`, selected
 * by X-Tenant, isolated from each other (data, pages, events), guarded by the JWT's tenant claim,
 * and released when idle.
 */
import { randomBytes } from "node:crypto"
import * as http from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { post } from "../support/auth.ts"
import { runPlinth } from "../support/cli.ts"
import { createTestDatabase, query, type TestDatabase } from "../support/database.ts"
import { eventually } from "../support/eventually.ts"
import { type RunningService, startService } from "../support/services.ts"

let control: TestDatabase
let main: RunningService
const suffix = randomBytes(4).toString("hex")
// Named like the suite's databases, so the run's teardown drops them with the rest.
const acme = `plinth_test_acme_${suffix}`
const globex = `plinth_test_globex_${suffix}`

const cliEnv = () => ({ DATABASE_URL: control.mainUrl, DATABASE_ADMIN_URL: control.adminUrl, MULTI_TENANT: "true" })
const tenantAdminUrl = (name: string) => {
  const url = new URL(control.adminUrl)
  url.pathname = `/${name}`
  return url.toString()
}

/** Invites through the CLI, as a database administrator of the tenant, and verifies the link. */
const signIn = async (tenant: string, email: string, role: string) => {
  const plinth = runPlinth(["invite", "--tenant", tenant, email, role], cliEnv())
  expect(await plinth.exited).toBe(0)
  const token = plinth.stdout().match(/token=([0-9a-f]{64})/)![1]!
  const response = await post<{ token: string }>(main.url, "/auth/magic-link/verify", { token }, { headers: { "x-tenant": tenant } })
  expect(response.status).toBe(200)
  return response.body.token
}

const sql = (tenant: string, token: string, text: string, params: ReadonlyArray<unknown> = []) =>
  post<{ rows: Array<Record<string, unknown>>; rowCount: number }>(main.url, "/sql", { sql: text, params }, {
    token,
    headers: { "x-tenant": tenant }
  })

let acmeOwner: string
let globexOwner: string

beforeAll(async () => {
  control = await createTestDatabase()
  for (const name of [acme, globex]) {
    const plinth = runPlinth(["tenant", "create", name], cliEnv())
    expect(await plinth.exited, plinth.stderr()).toBe(0)
    expect(plinth.stdout()).toContain(`Tenant ${name} is ready`)
  }
  main = await startService("main", control.mainUrl, { MULTI_TENANT: "true", TENANT_IDLE_TIMEOUT: "1s", EVENTS_HEARTBEAT: "10s" })
  acmeOwner = await signIn(acme, `owner@${suffix}.acme`, "owner")
  globexOwner = await signIn(globex, `owner@${suffix}.globex`, "owner")
}, 120_000)
afterAll(async () => {
  await main?.close()
  await control?.drop()
})

describe("plinth tenant", () => {
  it("list shows the registered tenants; migrate finds them up to date", async () => {
    const list = runPlinth(["tenant", "list"], cliEnv())
    expect(await list.exited).toBe(0)
    expect(list.stdout()).toContain(acme)
    expect(list.stdout()).toContain(globex)
    const migrate = runPlinth(["tenant", "migrate"], cliEnv())
    expect(await migrate.exited).toBe(0)
    expect(migrate.stdout()).toContain(`${acme}: up to date`)
  })

  it.each(["postgres", "template1", "Bad-Name", "1abc"])("refuses the name %j in one line", async (name) => {
    const plinth = runPlinth(["tenant", "create", name], cliEnv())
    expect(await plinth.exited).toBe(1)
    expect(plinth.stderr().trim()).toMatch(/^plinth: invalid tenant name/)
  })
})

describe("plinth audit prune --tenant", () => {
  const actions = (tenant: string) =>
    query(tenantAdminUrl(tenant), (s) => s<{ action: string }>`SELECT action FROM sys.audit_events ORDER BY id`).then((rows) => rows.map((row) => row.action))

  it("prunes that tenant's audit trail only", async () => {
    const globexBefore = await actions(globex)
    const acmeBefore = await actions(acme)
    expect(acmeBefore).toEqual(expect.arrayContaining(["user.invite", "user.sign_in"]))
    const plinth = runPlinth(["audit", "prune", "--tenant", acme, "--before", "2999-01-01"], cliEnv())
    expect(await plinth.exited, plinth.stderr()).toBe(0)
    expect(plinth.stdout().trim()).toBe(`Deleted ${acmeBefore.length} audit events older than 2999-01-01T00:00:00.000Z.`)
    expect(await actions(acme)).toEqual(["audit.prune"])
    expect(await actions(globex)).toEqual(globexBefore)
  })
})

describe("X-Tenant", () => {
  it("is required (400), must be well-formed (400), and must be registered (404, no connection attempt)", async () => {
    expect(await post(main.url, "/sql", { sql: "SELECT 1" }, { token: acmeOwner })).toMatchObject({ status: 400, body: { error: "X-Tenant is required" } })
    expect((await post(main.url, "/sql", { sql: "SELECT 1" }, { token: acmeOwner, headers: { "x-tenant": "Acme!" } })).status).toBe(400)
    const before = await query(control.adminUrl, (s) => s<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = 'postgres'`)
    const unknown = await post(main.url, "/sql", { sql: "SELECT 1" }, { token: acmeOwner, headers: { "x-tenant": "postgres" } })
    expect(unknown).toMatchObject({ status: 404, body: { error: "unknown tenant: postgres" } })
    const after = await query(control.adminUrl, (s) => s<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = 'postgres'`)
    expect(after[0]!.n).toBeLessThanOrEqual(before[0]!.n)
  })

  it("is not needed for /health and /ready", async () => {
    expect((await fetch(`${main.url}/health`)).status).toBe(200)
    expect((await fetch(`${main.url}/ready`)).status).toBe(200)
  })

  it("selects the tenant's own database", async () => {
    expect((await sql(acme, acmeOwner, "SELECT current_database() AS db")).body.rows).toEqual([{ db: acme }])
    expect((await sql(globex, globexOwner, "SELECT current_database() AS db")).body.rows).toEqual([{ db: globex }])
  })
})

describe("the tenant claim", () => {
  it("JWTs carry the tenant they were issued for", () => {
    const claims = JSON.parse(Buffer.from(acmeOwner.split(".")[1]!, "base64url").toString()) as Record<string, unknown>
    expect(claims["tenant"]).toBe(acme)
  })

  it("a token of one tenant is 403 at another, on /sql, POST / and /events", async () => {
    expect(await sql(globex, acmeOwner, "SELECT 1")).toMatchObject({ status: 403, body: { error: "this token belongs to another tenant" } })
    expect((await post(main.url, "/", {}, { token: acmeOwner, headers: { "x-tenant": globex } })).status).toBe(403)
    const events = await fetch(`${main.url}/events?token=${acmeOwner}`, { headers: { "x-tenant": globex } })
    expect(events.status).toBe(403)
  })

  it("a magic link of one tenant does not sign in at another", async () => {
    const plinth = runPlinth(["invite", "--tenant", acme, `cross@${suffix}.acme`, "member"], cliEnv())
    expect(await plinth.exited).toBe(0)
    const token = plinth.stdout().match(/token=([0-9a-f]{64})/)![1]!
    expect((await post(main.url, "/auth/magic-link/verify", { token }, { headers: { "x-tenant": globex } })).status).toBe(401)
    expect((await post(main.url, "/auth/magic-link/verify", { token }, { headers: { "x-tenant": acme } })).status).toBe(200)
  })
})

describe("isolation", () => {
  it("data, apps and introspection do not cross", async () => {
    const created = await sql(acme, acmeOwner, "SELECT sys.create_table($1, $2::jsonb) AS r", ["widgets", [{ name: "label", type: "text" }]])
    expect(created.status).toBe(200)
    expect((await sql(acme, acmeOwner, "INSERT INTO widgets (label) VALUES ('only acme')")).body.rowCount).toBe(1)
    expect((await sql(globex, globexOwner, "SELECT * FROM widgets")).status).toBe(400) // 42P01: no such table here
    const acmeSchema = await post<{ relations: Array<{ table_name: string }> }>(main.url, "/", {}, { token: acmeOwner, headers: { "x-tenant": acme } })
    const globexSchema = await post<{ relations: Array<{ table_name: string }> }>(main.url, "/", {}, { token: globexOwner, headers: { "x-tenant": globex } })
    expect(acmeSchema.body.relations.map((r) => r.table_name)).toContain("widgets")
    expect(globexSchema.body.relations.map((r) => r.table_name)).not.toContain("widgets")
  })

  it("page events reach only the tenant's own streams", async () => {
    const acmeStream = openStream(acme, acmeOwner)
    const globexStream = openStream(globex, globexOwner)
    try {
      await eventually(async () => acmeStream.text().includes("connected") && globexStream.text().includes("connected"))
      expect((await sql(acme, acmeOwner, "SELECT sys.create_page('welcome', 'Welcome', '')")).status).toBe(200)
      await eventually(async () => acmeStream.text().includes("welcome"))
      // Time for the change to reach globex's stream too, were it going to: nothing to wait for.
      await new Promise((resolve) => setTimeout(resolve, 200))
      expect(acmeStream.text()).toContain(`event: page_change\ndata: {"schema":"public","slug":"welcome"}`)
      expect(globexStream.text()).not.toContain("welcome")
    } finally {
      acmeStream.close()
      globexStream.close()
    }
  })
})

describe("each live tenant", () => {
  it("has exactly one LISTEN connection (both channels), of its own database", async () => {
    for (const [tenant, token] of [[acme, acmeOwner], [globex, globexOwner]] as const) {
      expect((await sql(tenant, token, "SELECT 1 AS one")).status).toBe(200)
    }
    const listening = async (tenant: string) =>
      (await query(control.adminUrl, (s) =>
        s<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = ${tenant} AND usename = 'authenticator' AND application_name = 'plinth listen'`))[0]!.n
    for (const tenant of [acme, globex]) {
      // The actor opens it as the tenant starts, without holding up the first request.
      await eventually(async () => (await listening(tenant)) > 0)
      expect(await listening(tenant)).toBe(1)
    }
  })
})

/** GET /events of `tenant` as `token`: what it has received, and whether it has ended. */
const openStream = (tenant: string, token: string) => {
  let text = ""
  let ended = false
  const request = http.get(new URL(`/events?token=${token}`, main.url), { headers: { "x-tenant": tenant }, agent: false }, (response) => {
    response.setEncoding("utf8")
    response.on("data", (chunk: string) => (text += chunk))
    response.on("end", () => (ended = true))
  })
  request.on("error", () => undefined)
  return { text: () => text, ended: () => ended, close: () => request.destroy() }
}

/** The main service's connections to the tenant's database. */
const tenantConnections = async (tenant: string) =>
  (await query(control.adminUrl, (s) =>
    s<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = ${tenant} AND usename = 'authenticator'`))[0]!.n

describe("idle tenants", () => {
  it("are not released while an event stream of theirs is open: changes still reach it past TENANT_IDLE_TIMEOUT", async () => {
    const stream = openStream(globex, globexOwner)
    try {
      await eventually(async () => stream.text().includes("connected"))
      expect(stream.text()).toContain(": connected")
      // Longer than TENANT_IDLE_TIMEOUT (1 s) without a request of the tenant.
      await new Promise((resolve) => setTimeout(resolve, 1_800))
      expect(stream.ended()).toBe(false)
      expect((await sql(globex, globexOwner, "SELECT sys.create_page('kept', 'Kept', '')")).status).toBe(200)
      await eventually(async () => stream.text().includes("kept"))
      expect(stream.text()).toContain(`data: {"schema":"public","slug":"kept"}`)
    } finally {
      stream.close()
    }
    // Closed, the stream lets its tenant go: released after TENANT_IDLE_TIMEOUT like any other.
    expect(await eventually(async () => (await tenantConnections(globex)) === 0, 10_000, 100)).toBe(true)
  })


  it("release their connections after TENANT_IDLE_TIMEOUT, and come back on the next request", async () => {
    const connections = () => tenantConnections(globex)
    expect((await sql(globex, globexOwner, "SELECT 1 AS one")).status).toBe(200)
    expect(await connections()).toBeGreaterThan(0)
    expect(await eventually(async () => (await connections()) === 0, 10_000, 100)).toBe(true)
    expect((await sql(globex, globexOwner, "SELECT 1 AS one")).body.rows).toEqual([{ one: 1 }])
  })
})
