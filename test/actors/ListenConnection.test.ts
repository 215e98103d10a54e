/**
 * The tenant's one LISTEN connection (TenantActor), against the main service: the tenant has
 * exactly one, for both channels, and once it is killed (pg_terminate_backend) both kinds of
 * change arrive again over the one the actor opens in its place: a catalog change made by another
 * session ends a cached app resolution, and a page change reaches an open event stream (after its
 * `resync`).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { LISTEN_APPLICATION_NAME } from "../../src/actors/TenantActor.ts"
import { type AuthStack, post, signedIn, startAuthStack } from "../support/auth.ts"
import { query } from "../support/database.ts"
import { eventually } from "../support/eventually.ts"
import { openRawStream } from "../reliability/faults.ts"

let stack: AuthStack
let owner: string

beforeAll(async () => {
  stack = await startAuthStack()
  owner = (await signedIn(stack, "listen-owner@plinth.test", "owner")).token
})
afterAll(() => stack?.close())

/** The backends of this database listening for the service: by name, and by their last statement. */
const listeners = async () => {
  const [row] = await query(stack.db.adminUrl, (sql) =>
    sql<{ pids: Array<number>; listening: number }>`SELECT coalesce(array_agg(pid) FILTER (WHERE application_name = ${LISTEN_APPLICATION_NAME}), '{}') AS pids,
        count(*) FILTER (WHERE query ILIKE 'LISTEN%')::int AS listening
      FROM pg_stat_activity WHERE datname = current_database() AND usename = 'authenticator'`)
  return row!
}

/** POST /sql in the app `schema`: 200 once the service knows the app, 400 while it does not. */
const inApp = async (schema: string) => (await post(stack.main.url, "/sql", { sql: "SELECT 1 AS one" }, { token: owner, headers: { "x-app-schema": schema } })).status

describe("the tenant's LISTEN connection", () => {
  it("is one connection for both channels", async () => {
    expect(await eventually(async () => (await listeners()).pids.length === 1, 5_000)).toBe(true)
    expect((await listeners()).listening).toBe(1)
  })

  it("killed, it is replaced by one, over which a catalog change and a page change both arrive", async () => {
    const stream = openRawStream(`${stack.main.url}/events`, owner)
    try {
      await stream.waitFor(/: connected\n\n/, 5_000)
      const [killed] = (await listeners()).pids
      const [terminated] = await query(stack.db.adminUrl, (sql) => sql<{ done: boolean }>`SELECT pg_terminate_backend(${killed!}) AS done`)
      expect(terminated!.done).toBe(true)
      await stream.waitFor(/event: resync\ndata: \{\}\n\n/, 10_000)
      const after = await listeners()
      expect(after.pids).toHaveLength(1)
      expect(after.pids[0]).not.toBe(killed)
      expect(after.listening).toBe(1)

      // Unknown now, and cached as unknown: only a notification on the new connection ends that.
      const app = `elsewhere_${Date.now()}`
      expect(await inApp(app)).toBe(400)
      expect(await inApp(app)).toBe(400)
      await query(stack.db.adminUrl, (sql) => sql`SELECT sys.create_app(${app}, 'Elsewhere', '')`)
      expect(await eventually(async () => (await inApp(app)) === 200, 5_000)).toBe(true)

      const slug = `after-kill-${Date.now()}`
      const created = await post(stack.main.url, "/sql", { sql: "SELECT sys.create_page($1, $2, $3)", params: [slug, "T", ""] }, { token: owner })
      expect(created.status).toBe(200)
      await stream.waitFor(new RegExp(`event: page_change\\ndata: \\{"schema":"public","slug":"${slug}"\\}\\n\\n`), 5_000)
      expect((await listeners()).pids).toHaveLength(1)
    } finally {
      stream.close()
    }
  }, 30_000)
})
