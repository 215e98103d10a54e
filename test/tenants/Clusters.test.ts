/**
 * Tenants across clusters (issue #27), placement: `plinth cluster add` gives a second cluster
 * Plinth's roles and grants, new tenants go to the active cluster with the fewest tenants that is
 * under its cap and within its connection budget (or to --cluster), a full or draining cluster is
 * skipped, all full is one clear error; and the registry of a control database migrated before the
 * clusters keeps its tenants, on the control cluster.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Duration, Effect, Exit, Layer, Option, Redacted, Scope } from "effect"
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ensureDatabase, migrateDatabase } from "../../src/layers/Database.ts"
import { setClusterState } from "../../src/layers/Clusters.ts"
import { createTenant } from "../../src/layers/TenantAdmin.ts"
import { runPlinth } from "../support/cli.ts"
import { openTenantStream, runAdmin, startTestCluster, type TestCluster } from "../support/cluster.ts"
import { createTestDatabase, query, type TestDatabase } from "../support/database.ts"
import { post } from "../support/auth.ts"
import { eventually } from "../support/eventually.ts"
import { type RunningService, startService } from "../support/services.ts"

let control: TestDatabase
let second: TestCluster
const suffix = randomBytes(3).toString("hex")
const name = (which: string) => `plinth_test_${which}_${suffix}`

const env = (extra: Record<string, string> = {}) => ({
  DATABASE_URL: control.mainUrl,
  DATABASE_ADMIN_URL: control.adminUrl,
  MULTI_TENANT: "true",
  ...extra
})

const create = (tenant: string, options: { cluster?: string; env?: Record<string, string> } = {}) =>
  runAdmin(createTenant(tenant, Option.fromNullishOr(options.cluster)).pipe(Effect.result), env(options.env))

const clusterOf = async (tenant: string) =>
  (await query(control.adminUrl, (sql) => sql<{ cluster: string }>`SELECT cluster FROM plinth.tenants WHERE name = ${tenant}`))[0]?.cluster

const databasesOn = (url: string) =>
  query(url, (sql) => sql<{ datname: string }>`SELECT datname FROM pg_database WHERE datname LIKE ${`plinth_test_%_${suffix}`}`)
    .then((rows) => rows.map((row) => row.datname).sort())

beforeAll(async () => {
  control = await createTestDatabase()
  second = await startTestCluster({ max_connections: "40" })
}, 120_000)
afterAll(async () => {
  await second?.stop()
  await control?.drop()
})

describe("plinth cluster add", () => {
  it("creates Plinth's roles, grants and login passwords on the new cluster, and registers it", async () => {
    const before = await query(second.adminUrl(), (sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_roles WHERE rolname = 'authenticator'`)
    expect(before[0]!.n).toBe(0)
    const plinth = runPlinth([
      "cluster", "add", "second",
      "--admin-url", second.templates.admin,
      "--url", second.templates.url,
      "--chat-url", second.templates.chat,
      "--max-databases", "2"
    ], env())
    expect(await plinth.exited, plinth.stderr()).toBe(0)
    expect(plinth.stdout()).toContain("Cluster second is ready")
    const roles = await query(second.adminUrl(), (sql) =>
      sql<{ rolname: string }>`SELECT rolname FROM pg_roles WHERE rolname IN ('owner', 'admin', 'staff', 'member', 'anon', 'authenticator', 'chat_authenticator') ORDER BY 1`)
    expect(roles.map((role) => role.rolname)).toEqual(["admin", "anon", "authenticator", "chat_authenticator", "member", "owner", "staff"])
    const grants = await query(second.adminUrl(), (sql) =>
      sql<{ member: string; role: string }>`SELECT m.rolname AS member, r.rolname AS role FROM pg_auth_members a
        JOIN pg_roles m ON m.oid = a.member JOIN pg_roles r ON r.oid = a.roleid
        WHERE m.rolname IN ('authenticator', 'chat_authenticator') ORDER BY 1, 2`)
    expect(grants).toEqual([
      ...["admin", "anon", "member", "owner", "staff"].map((role) => ({ member: "authenticator", role })),
      ...["admin", "owner"].map((role) => ({ member: "chat_authenticator", role }))
    ])
    // The login roles sign in with the passwords of the runtime templates.
    const signedIn = await query(second.templates.url.replace("{tenant}", "plinth"), (sql) => sql<{ who: string }>`SELECT current_user AS who`)
    expect(signedIn).toEqual([{ who: "authenticator" }])

    const list = runPlinth(["cluster", "list"], env())
    expect(await list.exited, list.stderr()).toBe(0)
    expect(list.stdout()).toMatch(/^default\s+active\s+0\s+-\s+\d+\/200$/m)
    expect(list.stdout()).toMatch(/^second\s+active\s+0\s+2\s+\d+\/40$/m)
  }, 60_000)

  it("refuses a name taken, a template without {tenant}, in one line", async () => {
    const again = runPlinth(["cluster", "add", "second", "--admin-url", second.templates.admin, "--url", second.templates.url, "--chat-url", second.templates.chat], env())
    expect(await again.exited).toBe(1)
    expect(again.stderr().trim()).toBe("plinth: cluster second exists already")
    const bad = runPlinth(["cluster", "add", "third", "--admin-url", second.adminUrl(), "--url", second.templates.url, "--chat-url", second.templates.chat], env())
    expect(await bad.exited).toBe(1)
    expect(bad.stderr().trim()).toBe("plinth: --admin-url: a postgres:// URL with {tenant} in place of the database name")
  }, 60_000)
})

describe("placement", () => {
  it("goes to the active cluster with the fewest tenants, skips a full one, and says so when all are full", async () => {
    // Ties go by name: default before second.
    for (const [tenant, expected] of [["a1", "default"], ["a2", "second"], ["a3", "default"], ["a4", "second"], ["a5", "default"]] as const) {
      expect((await create(name(tenant)))._tag).toBe("Success")
      expect(await clusterOf(name(tenant))).toBe(expected)
    }
    // second holds 2 of its 2: a6 goes to default although it has more.
    expect((await create(name("a6")))._tag).toBe("Success")
    expect(await clusterOf(name("a6"))).toBe("default")
    expect(await databasesOn(second.adminUrl())).toEqual([name("a2"), name("a4")])

    // --cluster names a full one: refused with the reason.
    const forced = await create(name("a7"), { cluster: "second" })
    expect(forced._tag === "Failure" && forced.failure.message).toBe(`cannot place tenant ${name("a7")} on second holds 2 of its 2 databases`)

    await runAdmin(setClusterState("default", "draining"), env())
    const none = await create(name("a7"))
    expect(none._tag === "Failure" && none.failure.message).toBe(
      `no cluster can take tenant ${name("a7")}: default is draining; second holds 2 of its 2 databases; add one (plinth cluster add) or raise a cap`
    )
    expect(await clusterOf(name("a7"))).toBeUndefined()
    await runAdmin(setClusterState("default", "active"), env())
  }, 120_000)

  it("respects each cluster's connection budget: max_connections minus the reserve", async () => {
    await query(control.adminUrl, (sql) => sql`UPDATE plinth.clusters SET max_databases = NULL WHERE name = 'second'`)
    // second (max_connections 40, reserve 20) with 20 connections held open: at its budget.
    const scope = Effect.runSync(Scope.make())
    try {
      const pool = await Effect.runPromise(Scope.provide(scope)(Layer.build(PgClient.layer({
        url: Redacted.make(second.adminUrl()),
        maxConnections: 20,
        idleTimeout: Duration.minutes(5)
      }))))
      const pg = Context.get(pool, PgClient.PgClient)
      // Twenty at once: the pool opens twenty connections and keeps them.
      await Effect.runPromise(Effect.all(Array.from({ length: 20 }, () => pg`SELECT pg_sleep(0.3)`), { concurrency: 20 }))
      const used = await query(second.adminUrl(), (s) => s<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'client backend'`)
      expect(used[0]!.n).toBeGreaterThanOrEqual(20)

      // second has the fewer tenants (2 against 4), but no room for connections: default takes it.
      expect((await create(name("b1"), { env: { CLUSTER_CONNECTION_RESERVE: "20" } }))._tag).toBe("Success")
      expect(await clusterOf(name("b1"))).toBe("default")
      const forced = await create(name("b2"), { cluster: "second", env: { CLUSTER_CONNECTION_RESERVE: "20" } })
      expect(forced._tag === "Failure" && forced.failure.message).toMatch(
        new RegExp(`^cannot place tenant ${name("b2")} on second has \\d+ connections open, at its budget of 20 \\(max_connections 40 minus a reserve of 20\\)$`)
      )
      // A reserve larger than any cluster's max_connections: all full.
      const none = await create(name("b2"), { env: { CLUSTER_CONNECTION_RESERVE: "1000" } })
      expect(none._tag === "Failure" && none.failure.message).toMatch(/^no cluster can take tenant \S+: default has \d+ connections open, at its budget of -800 .*; second has \d+ connections open, at its budget of -960 /)
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
    // Room again: second takes the next one.
    expect((await create(name("b3"), { env: { CLUSTER_CONNECTION_RESERVE: "20" } }))._tag).toBe("Success")
    expect(await clusterOf(name("b3"))).toBe("second")
  }, 120_000)

  it("two placements at once do not both take a cluster's last place", async () => {
    await query(control.adminUrl, (sql) => sql`UPDATE plinth.clusters SET max_databases = 1 + (
      SELECT count(*) FROM plinth.tenants WHERE 'second' IN (cluster, moving_to, previous_cluster)) WHERE name = 'second'`)
    await runAdmin(setClusterState("default", "draining"), env())
    try {
      const results = await Promise.all([create(name("d1")), create(name("d2"))])
      expect(results.map((result) => result._tag).sort()).toEqual(["Failure", "Success"])
    } finally {
      await runAdmin(setClusterState("default", "active"), env())
      await query(control.adminUrl, (sql) => sql`UPDATE plinth.clusters SET max_databases = NULL WHERE name = 'second'`)
    }
  }, 60_000)

  it("plinth tenant create --cluster places it there; invite --tenant reaches it on its cluster", async () => {
    const plinth = runPlinth(["tenant", "create", name("c1"), "--cluster", "second"], env())
    expect(await plinth.exited, plinth.stderr()).toBe(0)
    expect(plinth.stdout()).toContain(`Tenant ${name("c1")} is ready on cluster second`)
    expect(await databasesOn(second.adminUrl())).toContain(name("c1"))
    const invite = runPlinth(["invite", "--tenant", name("c1"), `owner@${suffix}.example`, "owner"], env())
    expect(await invite.exited, invite.stderr()).toBe(0)
    const users = await query(second.adminUrl(name("c1")), (sql) => sql<{ email: string }>`SELECT email FROM sys.users`)
    expect(users).toEqual([{ email: `owner@${suffix}.example` }])
  }, 60_000)
})

describe("a control database migrated before clusters", () => {
  it("gets the cluster default for its tenants from migration 0025, epoch 1, active", async () => {
    const old = await createTestDatabase()
    try {
      await query(old.adminUrl, (sql) =>
        Effect.gen(function*() {
          yield* sql`DROP TRIGGER tenant_changed ON plinth.tenants`
          yield* sql`DROP TABLE plinth.move_marks`
          yield* sql`ALTER TABLE plinth.tenants DROP COLUMN cluster, DROP COLUMN state, DROP COLUMN epoch, DROP COLUMN moving_to, DROP COLUMN previous_cluster`
          yield* sql`DROP TABLE plinth.clusters`
          yield* sql`DELETE FROM plinth.schema_migrations WHERE version = 25`
          yield* sql`INSERT INTO plinth.tenants (name) VALUES ('acme'), ('globex')`
        }))
      expect(await Effect.runPromise(migrateDatabase(old.adminUrl))).toEqual(["0025_clusters.sql"])
      const rows = await query(old.adminUrl, (sql) => sql<{ name: string; cluster: string; state: string; epoch: number }>`
        SELECT name, cluster, state, epoch FROM plinth.tenants ORDER BY name`)
      expect(rows).toEqual([
        { name: "acme", cluster: "default", state: "active", epoch: 1 },
        { name: "globex", cluster: "default", state: "active", epoch: 1 }
      ])
    } finally {
      await old.drop()
    }
  })
})

describe("routing that follows the registry", () => {
  const tenant = name("r1")
  let replicas: Array<RunningService> = []
  let chat: RunningService
  let token: string
  const port = async (replica: RunningService) => {
    const response = await post<{ rows: Array<{ port: number }> }>(replica.url, "/sql", { sql: "SELECT inet_server_port() AS port" }, { token, headers: { "x-tenant": tenant } })
    return response.status === 200 ? response.body.rows[0]!.port : response.status
  }
  const controlPort = () => Number(new URL(control.adminUrl).port)
  const secondPort = () => Number(new URL(second.adminUrl()).port)
  /** The main services' connections to the tenant's database on the control cluster. */
  const onControl = async () =>
    (await query(control.adminUrl, (sql) =>
      sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = ${tenant} AND usename = 'authenticator'`))[0]!.n
  const openStream = (replica: RunningService) => openTenantStream(replica.url, token, tenant)

  beforeAll(async () => {
    expect((await create(tenant, { cluster: "default" }))._tag).toBe("Success")
    // The same tenant made by hand on the second cluster, with the same user, for the registry to point at.
    const onSecond = second.adminUrl(tenant)
    await Effect.runPromise(ensureDatabase(second.adminUrl(), tenant))
    await Effect.runPromise(migrateDatabase(onSecond))
    const sourceUrl = control.adminUrl.replace(`/${control.name}`, `/${tenant}`)
    const [invited] = await query(sourceUrl, (sql) => sql<{ token: string }>`SELECT sys.invite_user(${`owner@${suffix}.example`}, 'owner') AS token`)
    const [user] = await query(sourceUrl, (sql) => sql<{ row: unknown }>`SELECT row_to_json(u) AS row FROM sys.users u`)
    await query(onSecond, (sql) => sql`INSERT INTO sys.users SELECT * FROM json_populate_record(NULL::sys.users, ${JSON.stringify(user!.row)}::json)`)
    for (let n = 0; n < 3; n++) replicas.push(await startService("main", control.mainUrl, { MULTI_TENANT: "true", LOG_REQUESTS: "false" }))
    chat = await startService("chat", control.chatUrl, { MULTI_TENANT: "true", LOG_REQUESTS: "false" })
    const verified = await post<{ token: string }>(replicas[0]!.url, "/auth/magic-link/verify", { token: invited!.token }, { headers: { "x-tenant": tenant } })
    token = verified.body.token
  }, 120_000)
  afterAll(async () => {
    for (const replica of replicas) await replica.close()
    await chat?.close()
  })

  it("an epoch change announced by the registry reaches every replica at once: pools and LISTEN connection rebuilt on the new cluster, streams told to resync", async () => {
    for (const replica of replicas) expect(await port(replica)).toBe(controlPort())
    const streams = replicas.map(openStream)
    try {
      await eventually(async () => streams.every((stream) => stream.text().includes("connected")))
      expect(await onControl()).toBeGreaterThan(0)
      const flippedAt = Date.now()
      await query(control.adminUrl, (sql) => sql`UPDATE plinth.tenants SET cluster = 'second', epoch = epoch + 1 WHERE name = ${tenant}`)
      const routedAfter: Array<number> = []
      for (const replica of replicas) {
        expect(await eventually(async () => (await port(replica)) === secondPort(), 1_000, 10)).toBe(true)
        routedAfter.push(Date.now() - flippedAt)
      }
      console.log(`registry flip (NOTIFY): replicas routed to the new cluster after ${routedAfter.join(", ")} ms`)
      for (const stream of streams) {
        expect(await eventually(async () => stream.ended())).toBe(true)
        expect(stream.text()).toContain("event: resync")
      }
      // The old pools and LISTEN connections are let go, without another request of the tenant.
      expect(await eventually(async () => (await onControl()) === 0)).toBe(true)
      const listening = async () =>
        (await query(second.adminUrl(), (sql) =>
          sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = ${tenant} AND application_name = 'plinth listen'`))[0]!.n
      expect(await eventually(async () => (await listening()) === 3)).toBe(true)
      // The chat service follows the registry too, with its own runtime template.
      const created = await post(chat.url, "/conversations", { title: "after the flip" }, { token, headers: { "x-tenant": tenant } })
      expect(created.status).toBe(201)
      const [kept] = await query(second.adminUrl(tenant), (sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM sys.conversations`)
      expect(kept!.n).toBe(1)
    } finally {
      for (const stream of streams) stream.close()
    }
  }, 60_000)

  it("a change the registry did not announce is found once the cache lifetime has passed", async () => {
    await query(control.adminUrl, (sql) =>
      Effect.gen(function*() {
        yield* sql`ALTER TABLE plinth.tenants DISABLE TRIGGER tenant_changed`
        yield* sql`UPDATE plinth.tenants SET cluster = 'default', epoch = epoch + 1 WHERE name = ${tenant}`
        yield* sql`ALTER TABLE plinth.tenants ENABLE TRIGGER tenant_changed`
      }))
    for (const replica of replicas) expect(await eventually(async () => (await port(replica)) === controlPort(), 10_000, 100)).toBe(true)
  }, 60_000)

  it("a tenant marked moving is answered 503 with Retry-After by every replica", async () => {
    await query(control.adminUrl, (sql) => sql`UPDATE plinth.tenants SET state = 'moving' WHERE name = ${tenant}`)
    try {
      for (const replica of replicas) {
        expect(await eventually(async () => (await port(replica)) === 503, 1_000, 10)).toBe(true)
        const response = await fetch(`${replica.url}/sql`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${token}`, "x-tenant": tenant },
          body: JSON.stringify({ sql: "SELECT 1" })
        })
        expect(response.status).toBe(503)
        expect(response.headers.get("retry-after")).toBe("1")
      }
    } finally {
      await query(control.adminUrl, (sql) => sql`UPDATE plinth.tenants SET state = 'active' WHERE name = ${tenant}`)
    }
    for (const replica of replicas) expect(await eventually(async () => (await port(replica)) === controlPort(), 1_000, 10)).toBe(true)
  }, 60_000)
})
