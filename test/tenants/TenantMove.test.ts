/**
 * Tenants across clusters (issue #27), the move: a tenant moved from the control cluster to a
 * second one with logical replication while a writer inserts and updates through three main
 * replicas; the registry's flip reaches all three at once (NOTIFY), their event streams get
 * `resync`, and nothing acknowledged is lost. Aborts before and after the flip leave the tenant
 * served with every row.
 *
 * The three replicas are three main services in this process: each builds its own layers (its own
 * pools, LISTEN connections and registry cache), which is what a replica is to the registry, at a
 * fraction of three processes' start-up on a shared machine.
 */
import { Effect, Fiber, Option } from "effect"
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as AppDefinition from "../../src/services/AppDefinition.ts"
import { addCluster } from "../../src/layers/Clusters.ts"
import { withDatabase } from "../../src/layers/Database.ts"
import { createTenant, tenantAdminUrl } from "../../src/layers/TenantAdmin.ts"
import { cleanupTenant, MoveRefused, type MoveStep, moveTenant } from "../../src/layers/TenantMove.ts"
import { post } from "../support/auth.ts"
import { runPlinth } from "../support/cli.ts"
import { adminLayer, openTenantStream, runAdmin, startTestCluster, type TestCluster } from "../support/cluster.ts"
import { createTestDatabase, query, type TestDatabase } from "../support/database.ts"
import { eventually } from "../support/eventually.ts"
import { type RunningService, startService } from "../support/services.ts"

let control: TestDatabase
let second: TestCluster
let replicas: Array<RunningService> = []
let token: string
const tenant = `plinth_test_mv_${randomBytes(3).toString("hex")}`

const env = () => ({ DATABASE_URL: control.mainUrl, DATABASE_ADMIN_URL: control.adminUrl, MULTI_TENANT: "true" })
const admin = <A, E>(effect: Parameters<typeof runAdmin<A, E>>[0]) => runAdmin(effect, env())

/** The tenant's database as its administrator, wherever the registry says it is. */
const tenantUrl = () => admin(tenantAdminUrl(tenant))
const controlPort = () => Number(new URL(control.adminUrl).port)
const secondPort = () => Number(new URL(second.adminUrl()).port)

const sql = (replica: RunningService, text: string, params: ReadonlyArray<unknown> = []) =>
  post<{ rows: Array<Record<string, unknown>>; error?: string }>(replica.url, "/sql", { sql: text, params }, { token, headers: { "x-tenant": tenant } })

/** Every table of a database: its row count and a checksum of its rows. */
const snapshot = (url: string, except: ReadonlyArray<string> = []) =>
  query(url, (s) =>
    Effect.gen(function*() {
      const tables = yield* s<{ name: string }>`SELECT format('%I.%I', schemaname, tablename) AS name FROM pg_tables
        WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1`
      const result: Record<string, string> = {}
      for (const { name } of tables.filter((table) => !except.includes(table.name))) {
        const [row] = yield* s.unsafe<{ n: number; sum: string }>(
          `SELECT count(*)::int AS n, md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) AS sum FROM ${name} t`)
        result[name] = `${row!.n}:${row!.sum}`
      }
      return result
    }))

const sequences = (url: string) =>
  query(url, (s) => s<{ name: string; last: string | null }>`SELECT format('%I.%I', schemaname, sequencename) AS name, last_value::text AS last
    FROM pg_sequences WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1`)

/** GET /events of the tenant on `replica`: what it has received, and whether it has ended. */
const openStream = (replica: RunningService) => openTenantStream(replica.url, token, tenant)

interface Write { readonly at: number; readonly replica: number; readonly ok: boolean; readonly status: number; readonly port?: number }

/**
 * Inserts and updates through the replicas in turn until stopped: which writes were acknowledged
 * (with the cluster's port that answered), and which refused.
 */
const startWriter = () => {
  const writes: Array<Write> = []
  const inserted: Array<{ id: string; label: string }> = []
  const updates = new Map<string, number>()
  let running = true
  let i = 0
  const done = (async () => {
    while (running) {
      const replica = i % replicas.length
      const update = i % 3 === 2 && inserted.length > 0
      const label = `w${i}`
      const target = update ? inserted[(i * 7) % inserted.length]! : undefined
      const response = await (update
        ? sql(replicas[replica]!, "UPDATE items SET n = n + 1 WHERE id = $1 RETURNING inet_server_port() AS port", [target!.id])
        : sql(replicas[replica]!, "INSERT INTO items (label, n) VALUES ($1, 0) RETURNING id::text, inet_server_port() AS port", [label])
      ).catch(() => ({ status: 0, body: { rows: [] } }))
      const ok = response.status === 200
      writes.push({ at: Date.now(), replica, ok, status: response.status, ...(ok ? { port: Number(response.body.rows[0]!["port"]) } : {}) })
      if (ok && update) updates.set(target!.id, (updates.get(target!.id) ?? 0) + 1)
      if (ok && !update) inserted.push({ id: String(response.body.rows[0]!["id"]), label })
      if (!ok) await new Promise((resolve) => setTimeout(resolve, 20))
      i++
    }
  })()
  return {
    writes,
    inserted,
    updates,
    stop: async () => {
      running = false
      await done
    }
  }
}

/** The longest stretch from a refused write to the next acknowledged one. */
const worstRefusal = (writes: ReadonlyArray<Write>) => {
  let worst = 0
  let refusedSince: number | undefined
  for (const write of writes) {
    if (!write.ok) refusedSince ??= write.at
    else if (refusedSince !== undefined) {
      worst = Math.max(worst, write.at - refusedSince)
      refusedSince = undefined
    }
  }
  return worst
}

/** Every acknowledged insert is there, and each row has the acknowledged updates. */
const expectAcknowledged = async (url: string, writer: ReturnType<typeof startWriter>) => {
  const rows = await query(url, (s) => s<{ id: string; label: string; n: number }>`SELECT id::text, label, n FROM items`)
  const byId = new Map(rows.map((row) => [row.id, row]))
  for (const insert of writer.inserted) expect(byId.get(insert.id)?.label).toBe(insert.label)
  for (const [id, count] of writer.updates) expect(byId.get(id)!.n).toBeGreaterThanOrEqual(count)
}

beforeAll(async () => {
  control = await createTestDatabase()
  second = await startTestCluster()
  await admin(addCluster({ name: "second", adminUrl: second.templates.admin, url: second.templates.url, chatUrl: second.templates.chat, maxDatabases: Option.none() }))
  await admin(createTenant(tenant))
  const url = await tenantUrl()
  // An app besides public's tables, to be moved with its definition.
  await Effect.runPromise(withDatabase(url, Effect.flatMap(AppDefinition.decode({
    plinth_app: 1, schema: "crm", display_name: "CRM", description: "", home_page: {},
    tables: [{ name: "deals", columns: [{ name: "title", type: "text" }], permissions: {
      staff: { read: "all", write: "all", delete: "all" }, member: { read: "own", write: "own", delete: "own" }, anon: { read: "none", write: "none", delete: "none" }
    } }],
    views: [], pages: [{ slug: "board", title: "Board", source: "# Deals" }]
  }), (definition) => AppDefinition.importApp(definition, "crm"))))
  const [invited] = await query(url, (s) => s<{ token: string }>`SELECT sys.invite_user(${`owner@${tenant}.example`}, 'owner') AS token`)
  for (let n = 0; n < 3; n++) {
    replicas.push(await startService("main", control.mainUrl, { MULTI_TENANT: "true", EVENTS_HEARTBEAT: "30s", LOG_REQUESTS: "false" }))
  }
  const verified = await post<{ token: string }>(replicas[0]!.url, "/auth/magic-link/verify", { token: invited!.token }, { headers: { "x-tenant": tenant } })
  token = verified.body.token
  expect((await sql(replicas[0]!, "SELECT sys.create_table('items', $1::jsonb)", [JSON.stringify([{ name: "label", type: "text" }, { name: "n", type: "integer" }])])).status).toBe(200)
  expect((await sql(replicas[0]!, "INSERT INTO crm.deals (title) VALUES ('first deal')")).status).toBe(200)
  expect((await sql(replicas[0]!, "SELECT sys.create_page('welcome', 'Welcome', 'hello')")).status).toBe(200)
}, 180_000)
afterAll(async () => {
  for (const replica of replicas) await replica.close()
  await second?.stop()
  await control?.drop()
})

describe("plinth tenant move", () => {
  it("moves the tenant under continuous writes: nothing acknowledged lost, sequences past, nothing committed on the source after the fence; all replicas follow", async () => {
    const streams = replicas.map(openStream)
    await eventually(async () => streams.every((stream) => stream.text().includes("connected")))
    const sourceUrl = await tenantUrl()
    const writer = startWriter()
    await eventually(async () => writer.inserted.length >= 30, 30_000)

    // The source is fenced then (it takes no connections): the target is read at the flip, the source after.
    let targetAtFlip: Record<string, string> = {}
    let sequencesAtFlip: Awaited<ReturnType<typeof sequences>> = []
    let flippedAt = 0
    const targetUrl = second.adminUrl(tenant)
    const moved = await admin(moveTenant(tenant, "second", {
      beforeStep: (step: MoveStep) =>
        Effect.promise(async () => {
          if (step === "flip") {
            targetAtFlip = await snapshot(targetUrl)
            sequencesAtFlip = await sequences(targetUrl)
          }
          if (step === "finish") flippedAt = Date.now()
        })
    }))
    expect(moved).toMatchObject({ from: "default", to: "second", epoch: 2 })

    // Every replica answers from the second cluster at once (NOTIFY; REGISTRY_TTL is the fallback).
    for (const replica of replicas) {
      expect(await eventually(async () => {
        const response = await sql(replica, "SELECT inet_server_port() AS port")
        return response.status === 200 && Number(response.body.rows[0]!["port"]) === secondPort()
      }, 1_000, 10)).toBe(true)
    }
    await eventually(async () => writer.writes.filter((w) => w.ok && w.port === secondPort()).length >= 30, 30_000)
    await writer.stop()

    const firstOnTarget = replicas.map((_, replica) => writer.writes.find((w) => w.replica === replica && w.ok && w.port === secondPort())!.at - flippedAt)
    const refusals = writer.writes.filter((w) => !w.ok)
    console.log(`tenant move under writes: fence ${moved.fenceMillis} ms; worst write refusal ${worstRefusal(writer.writes)} ms ` +
      `(${refusals.length} refused of ${writer.writes.length}: ${[...new Set(refusals.map((w) => w.status))].join(", ")}); ` +
      `first write on the new cluster after the flip, per replica: ${firstOnTarget.join(", ")} ms`)
    expect(writer.writes.filter((w) => w.ok && w.port === controlPort()).length).toBeGreaterThan(0)

    // Every table of the target at the flip equals the source's now: nothing acknowledged was lost, and
    // nothing committed on the source after the fence (its last commit, the move's mark, is there too).
    expect(targetAtFlip).toEqual(await snapshot(sourceUrl))
    expect(Object.keys(targetAtFlip)).toEqual(expect.arrayContaining(["public.items", "crm.deals", "sys.pages", "sys.users", "plinth.move_marks"]))
    for (const sequence of await sequences(sourceUrl)) {
      const target = sequencesAtFlip.find((s) => s.name === sequence.name)!
      expect(BigInt(target.last ?? 0)).toBeGreaterThanOrEqual(BigInt(sequence.last ?? 0))
    }
    await expectAcknowledged(targetUrl, writer)
    // The source is kept read-only and closed to the services.
    const [source] = await query(sourceUrl, (s) => s<{ readonly: string; connect: boolean }>`SELECT current_setting('default_transaction_read_only') AS readonly,
      has_database_privilege('authenticator', current_database(), 'CONNECT') AS connect`)
    expect(source).toEqual({ readonly: "on", connect: false })

    // The streams were told to resync and ended; streams opened now hear page changes made on the new cluster.
    for (const stream of streams) {
      expect(await eventually(async () => stream.ended(), 5_000)).toBe(true)
      expect(stream.text()).toContain("event: resync")
    }
    const again = replicas.map(openStream)
    try {
      await eventually(async () => again.every((stream) => stream.text().includes("connected")))
      expect((await sql(replicas[1]!, "SELECT sys.create_page('after_move', 'After', '')")).status).toBe(200)
      for (const stream of again) expect(await eventually(async () => stream.text().includes("after_move"))).toBe(true)
    } finally {
      for (const stream of [...streams, ...again]) stream.close()
    }
    // The app came along.
    expect((await sql(replicas[2]!, "SELECT title FROM crm.deals")).body.rows).toEqual([{ title: "first deal" }])
  }, 180_000)

  it("plinth tenant cleanup drops the old database; a second move waits for it", async () => {
    const refused = await admin(moveTenant(tenant, "default").pipe(Effect.flip))
    expect(refused.message).toBe(`tenant ${tenant} still has its old database on cluster default: plinth tenant cleanup ${tenant} first`)
    expect(await admin(cleanupTenant(tenant))).toEqual({ undone: Option.none(), dropped: Option.some("default") })
    const left = await query(control.adminUrl, (s) => s<{ n: number }>`SELECT count(*)::int AS n FROM pg_database WHERE datname = ${tenant}`)
    expect(left[0]!.n).toBe(0)
  }, 60_000)

  it("aborted before the flip: the tenant stays on its source, served, with every row, and nothing is left on the target", async () => {
    const writer = startWriter()
    await eventually(async () => writer.inserted.length >= 10, 30_000)
    const aborted = await admin(moveTenant(tenant, "default", {
      beforeStep: (step) => step === "flip" ? Effect.fail(new MoveRefused({ message: "aborted by the test" })) : Effect.void
    }).pipe(Effect.flip))
    expect(aborted.message).toBe("aborted by the test")
    const after = writer.writes.length
    await eventually(async () => writer.writes.slice(after).filter((w) => w.ok).length >= 10, 30_000)
    await writer.stop()
    const [row] = await query(control.adminUrl, (s) => s<{ cluster: string; state: string; epoch: number }>`SELECT cluster, state, epoch FROM plinth.tenants WHERE name = ${tenant}`)
    expect(row).toEqual({ cluster: "second", state: "active", epoch: 2 })
    expect(writer.writes.slice(after).filter((w) => w.ok).every((w) => w.port === secondPort())).toBe(true)
    await expectAcknowledged(second.adminUrl(tenant), writer)
    const onTarget = await query(control.adminUrl, (s) => s<{ n: number }>`SELECT count(*)::int AS n FROM pg_database WHERE datname = ${tenant}`)
    expect(onTarget[0]!.n).toBe(0)
    const slots = await query(second.adminUrl(), (s) => s<{ n: number }>`SELECT count(*)::int AS n FROM pg_replication_slots`)
    expect(slots[0]!.n).toBe(0)
    const publications = await query(second.adminUrl(tenant), (s) => s<{ n: number }>`SELECT count(*)::int AS n FROM pg_publication`)
    expect(publications[0]!.n).toBe(0)
    console.log(`tenant move aborted before the flip: worst write refusal ${worstRefusal(writer.writes)} ms`)
  }, 180_000)

  it("aborted after the flip: the tenant is served from the target with every row; cleanup tidies the rest", async () => {
    const writer = startWriter()
    await eventually(async () => writer.inserted.length >= 10, 30_000)
    const aborted = await admin(moveTenant(tenant, "default", {
      beforeStep: (step) => step === "finish" ? Effect.fail(new MoveRefused({ message: "aborted by the test" })) : Effect.void
    }).pipe(Effect.flip))
    expect(aborted.message).toBe("aborted by the test")
    const after = writer.writes.length
    await eventually(async () => writer.writes.slice(after).filter((w) => w.ok && w.port === controlPort()).length >= 10, 30_000)
    await writer.stop()
    const [row] = await query(control.adminUrl, (s) => s<{ cluster: string; state: string; epoch: number }>`SELECT cluster, state, epoch FROM plinth.tenants WHERE name = ${tenant}`)
    expect(row).toEqual({ cluster: "default", state: "active", epoch: 3 })
    await expectAcknowledged(await tenantUrl(), writer)
    expect(await admin(cleanupTenant(tenant))).toEqual({ undone: Option.none(), dropped: Option.some("second") })
    const slots = await query(second.adminUrl(), (s) => s<{ n: number }>`SELECT count(*)::int AS n FROM pg_replication_slots`)
    expect(slots[0]!.n).toBe(0)
    const databases = await query(second.adminUrl(), (s) => s<{ n: number }>`SELECT count(*)::int AS n FROM pg_database WHERE datname = ${tenant}`)
    expect(databases[0]!.n).toBe(0)
  }, 180_000)

  it("a move whose process is gone mid-fence is undone by plinth tenant cleanup; cleanup waits while a move runs", async () => {
    const writer = startWriter()
    await eventually(async () => writer.inserted.length >= 10, 30_000)
    let fenced = false
    // Paused inside its fence, as a process stopped there would be.
    const mover = Effect.runFork(Effect.provide(moveTenant(tenant, "second", {
      beforeStep: (step) => step === "apply" ? Effect.sync(() => (fenced = true)).pipe(Effect.andThen(Effect.never)) : Effect.void
    }), adminLayer(env())))
    try {
      expect(await eventually(async () => fenced, 60_000)).toBe(true)
      const [moving] = await query(control.adminUrl, (s) => s<{ state: string; moving_to: string }>`SELECT state, moving_to FROM plinth.tenants WHERE name = ${tenant}`)
      expect(moving).toEqual({ state: "moving", moving_to: "second" })
      const busy = await admin(cleanupTenant(tenant).pipe(Effect.flip))
      expect(busy.message).toBe(`a move of ${tenant} is running`)
      // The process is gone: its sessions (the lock's among them) end.
      await query(control.adminUrl, (s) => s`SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND objid = hashtext(${tenant})::oid AND classid = 7270027`)
      expect(await eventually(async () => (await admin(cleanupTenant(tenant).pipe(Effect.result)))._tag === "Success", 10_000, 200)).toBe(true)
      const [row] = await query(control.adminUrl, (s) => s<{ cluster: string; state: string; moving_to: string | null }>`SELECT cluster, state, moving_to FROM plinth.tenants WHERE name = ${tenant}`)
      expect(row).toEqual({ cluster: "default", state: "active", moving_to: null })
      const after = writer.writes.length
      expect(await eventually(async () => writer.writes.slice(after).filter((w) => w.ok && w.port === controlPort()).length >= 10, 30_000)).toBe(true)
      await writer.stop()
      await expectAcknowledged(await tenantUrl(), writer)
      const onSecond = await query(second.adminUrl(), (s) => s<{ n: number }>`SELECT count(*)::int AS n FROM pg_database WHERE datname = ${tenant}`)
      expect(onSecond[0]!.n).toBe(0)
    } finally {
      await writer.stop()
      await Effect.runPromise(Fiber.interrupt(mover))
    }
  }, 180_000)

  it("refuses a tenant with large objects (logical replication does not carry them) before making anything; the embedded server runs with wal_level=logical", async () => {
    const [level] = await query(control.adminUrl, (s) => s<{ level: string }>`SELECT current_setting('wal_level') AS level`)
    expect(level).toEqual({ level: "logical" })
    const withObjects = `${tenant}_lo`
    await admin(createTenant(withObjects, Option.some("default")))
    await query(await admin(tenantAdminUrl(withObjects)), (s) => s`SELECT lo_from_bytea(0, 'a file'::bytea)`)
    const refused = await admin(moveTenant(withObjects, "second").pipe(Effect.flip))
    expect(refused.message).toBe(`tenant ${withObjects} has 1 large objects, which logical replication does not carry; nothing was moved`)
    const [row] = await query(control.adminUrl, (s) => s<{ cluster: string; moving_to: string | null }>`SELECT cluster, moving_to FROM plinth.tenants WHERE name = ${withObjects}`)
    expect(row).toEqual({ cluster: "default", moving_to: null })
    const onSecond = await query(second.adminUrl(), (s) => s<{ n: number }>`SELECT count(*)::int AS n FROM pg_database WHERE datname = ${withObjects}`)
    expect(onSecond[0]!.n).toBe(0)
  }, 60_000)

  it("from the command line: plinth tenant move prints the move, tenant list the copy left, tenant cleanup drops it; a refusal is one line", async () => {
    const cli = `${tenant}_cli`
    await admin(createTenant(cli, Option.some("default")))
    const move = runPlinth(["tenant", "move", cli, "--to", "second"], env())
    expect(await move.exited, move.stderr()).toBe(0)
    expect(move.stdout()).toMatch(new RegExp(`^Moved ${cli} from default to second \\(epoch 2; fenced \\d+ ms; source applied to [0-9A-F]+/[0-9A-F]+\\)\\.$`, "m"))
    const list = runPlinth(["tenant", "list"], env())
    expect(await list.exited, list.stderr()).toBe(0)
    expect(list.stdout()).toMatch(new RegExp(`^${cli}\t\\S.*\tsecond\tactive \\(old copy on default\\)$`, "m"))
    const cleanup = runPlinth(["tenant", "cleanup", cli], env())
    expect(await cleanup.exited, cleanup.stderr()).toBe(0)
    expect(cleanup.stdout().trim()).toBe(`Dropped the old database of ${cli} on default.`)
    const refused = runPlinth(["tenant", "move", `${tenant}_lo`, "--to", "second"], env())
    expect(await refused.exited).toBe(1)
    expect(refused.stderr().trim()).toBe(`plinth: tenant ${tenant}_lo has 1 large objects, which logical replication does not carry; nothing was moved`)
  }, 120_000)
})
