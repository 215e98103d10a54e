/**
 * The audit trail (issue #24): every action of the list leaves exactly one event, in the
 * transaction of the change, with the actor, role, action, target and request id, whether done
 * through POST /sql, the auth endpoints or a chat tool; a failed action leaves none, except a
 * failed sign-in, recorded by the address's hash; owners and admins read it (sys.list_audit_events,
 * GET /admin/audit); nobody updates or deletes it through Plinth; a database administrator prunes it.
 */
import { createHash, randomUUID } from "node:crypto"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { inviteAsDatabaseAdmin, mailedToken, post, type SignIn, signedIn, verify } from "../support/auth.ts"
import { type ChatStack, newConversation, startChatStack } from "../support/chat.ts"
import { describeFailure } from "../../src/services/DatabaseError.ts"
import { runPlinth } from "../support/cli.ts"
import { get } from "../support/http.ts"
import { admin, chat, fresh, scriptedTurns, text, toolUse, type Turns } from "../chat/helpers.ts"

interface AuditRow {
  readonly id: string
  readonly at: Date
  readonly actor_id: string | null
  readonly actor_role: string
  readonly action: string
  readonly target: string | null
  readonly details: Record<string, unknown>
  readonly request_id: string | null
}

let stack: ChatStack
let owner: SignIn
let adminUser: SignIn
let staff: SignIn
let member: SignIn
let turns: Turns

beforeAll(async () => {
  stack = await startChatStack()
  turns = scriptedTurns(stack.model)
  ;[owner, adminUser, staff, member] = await Promise.all([
    signedIn(stack, "audit-owner@plinth.test", "owner"),
    signedIn(stack, "audit-admin@plinth.test", "admin"),
    signedIn(stack, "audit-staff@plinth.test", "staff"),
    signedIn(stack, "audit-member@plinth.test", "member")
  ])
}, 60_000)
afterAll(() => stack?.close())
afterEach(() => turns.reset())

/** The events of one request, as a superuser reads them. */
const eventsOf = (requestId: string) =>
  admin<AuditRow>(stack, "SELECT * FROM sys.audit_events WHERE request_id = $1 ORDER BY id", [requestId])

/** POST /sql as `user` with a request id of our own; its status and body. */
const sqlWithId = (user: SignIn, statement: string, params: ReadonlyArray<unknown> = [], requestId = randomUUID(), schema?: string) =>
  post<{ rows?: Array<Record<string, unknown>>; error?: { message: string; code: string } }>(stack.main.url, "/sql", { sql: statement, params }, {
    token: user.token,
    headers: { "x-request-id": requestId, ...(schema === undefined ? {} : { "x-app-schema": schema }) }
  }).then((response) => ({ ...response, requestId }))

/** Runs `call` as `user` and expects it to work and to leave exactly one event, which it returns. */
const oneEvent = async (user: SignIn, call: string, params: ReadonlyArray<unknown>, expected: Partial<AuditRow>, schema?: string) => {
  const response = await sqlWithId(user, `SELECT ${call} AS result`, params, undefined, schema)
  expect(response.status, JSON.stringify(response.body)).toBe(200)
  const events = await eventsOf(response.requestId)
  expect(events).toHaveLength(1)
  expect(events[0]).toMatchObject({ actor_id: user.user.id, actor_role: user.user.role, request_id: response.requestId, ...expected })
  return events[0]!
}

/** Runs `call` as `user`, expects `status`, and that it left no event. */
const noEvent = async (user: SignIn, call: string, params: ReadonlyArray<unknown>, status: number) => {
  const response = await sqlWithId(user, `SELECT ${call} AS result`, params)
  expect(response.status, JSON.stringify(response.body)).toBe(status)
  expect(await eventsOf(response.requestId)).toEqual([])
}

/** The server's message of a failed statement ("" when it did not fail). */
const serverError = (running: Promise<unknown>) =>
  running.then(() => "", describeFailure)

const emailHash = (email: string) => createHash("sha256").update(email.toLowerCase()).digest("hex")

describe("schema changes through POST /sql", () => {
  it("tables, columns, permissions, views, pages and apps each leave exactly one event with actor, role, action, target and request id", async () => {
    const table = fresh("audited")
    const view = fresh("audited_view")
    const app = fresh("audit_app")
    const slug = fresh("audit-page").replaceAll("_", "-")

    const created = await oneEvent(owner, "sys.create_table($1, $2::jsonb)", [table, JSON.stringify([{ name: "name", type: "text" }])], {
      action: "table.create",
      target: `public.${table}`
    })
    expect(created.details).toEqual({ columns: [{ name: "name", type: "text" }] })
    const operations = [{ op: "add_column", column: { name: "qty", type: "integer" } }]
    expect((await oneEvent(adminUser, "sys.alter_table($1, $2::jsonb)", [table, JSON.stringify(operations)], {
      action: "table.alter",
      target: `public.${table}`
    })).details).toEqual({ operations })
    expect((await oneEvent(owner, "sys.set_table_permissions($1, $2, $3, $4, $5)", [table, "member", "all", "own", "none"], {
      action: "permissions.set",
      target: `public.${table}`
    })).details).toEqual({ role: "member", read: "all", write: "own", delete: "none" })
    await oneEvent(owner, "sys.create_view($1, $2)", [view, `SELECT name FROM ${table}`], { action: "view.create", target: `public.${view}` })
    await oneEvent(adminUser, "sys.drop_view($1)", [view], { action: "view.drop", target: `public.${view}` })
    await oneEvent(owner, "sys.create_page($1, $2, $3)", [slug, "Title", "<p>hi</p>"], { action: "page.create", target: `public/${slug}` })
    await oneEvent(owner, "sys.update_page($1, $2, $3)", [slug, null, "<p>bye</p>"], {
      action: "page.update",
      target: `public/${slug}`,
      details: { title_changed: false, source_changed: true }
    })
    await oneEvent(adminUser, "sys.delete_page($1)", [slug], { action: "page.delete", target: `public/${slug}` })
    await oneEvent(owner, "sys.drop_table($1)", [table], { action: "table.drop", target: `public.${table}` })

    await oneEvent(owner, "sys.create_app($1, $2)", [app, "Audit app"], { action: "app.create", target: app })
    // Within the app: the target names the app's schema.
    const inApp = fresh("in_app")
    await oneEvent(owner, "sys.create_table($1, $2::jsonb)", [inApp, "[]"], { action: "table.create", target: `${app}.${inApp}` }, app)
    await oneEvent(adminUser, "sys.update_app($1, $2, $3)", [app, "Renamed", "about"], { action: "app.update", target: app })
    const renamed = fresh("audit_app2")
    await oneEvent(owner, "sys.rename_app($1, $2)", [app, renamed], { action: "app.rename", target: renamed, details: { from: app } })
    await oneEvent(owner, "sys.drop_app($1)", [renamed], { action: "app.drop", target: renamed })
  })

  it("a failed change leaves no event: refused, invalid, or failing halfway", async () => {
    const table = fresh("failing")
    await noEvent(staff, "sys.create_table($1, $2::jsonb)", [table, "[]"], 403)
    await noEvent(owner, "sys.create_table($1, $2::jsonb)", ["Not A Name", "[]"], 400)
    await noEvent(owner, "sys.drop_table($1)", [fresh("missing")], 400)
    // The table is created before the bad column fails: all of it, event included, rolls back.
    await noEvent(owner, "sys.create_table($1, $2::jsonb)", [table, JSON.stringify([{ name: "x", type: "nonsense" }])], 400)
    expect((await admin(stack, "SELECT to_regclass($1) AS found", [`public.${table}`]))[0]).toEqual({ found: null })
    await noEvent(owner, "sys.create_page($1, $2, $3)", ["Bad Slug", "", ""], 400)
    await noEvent(member, "sys.set_table_permissions($1, $2, $3, $4, $5)", ["x", "member", "all", "all", "all"], 403)
  })
})

describe("users and sign-ins", () => {
  it("an invite, its magic-link sign-in, the first password, a password sign-in and an email change each leave one event", async () => {
    const email = `${fresh("invited")}@plinth.test`
    const invite = await post(stack.main.url, "/admin/invite", { email, role: "staff" }, { token: adminUser.token, headers: { "x-request-id": `invite-${randomUUID()}` } })
    expect(invite.status).toBe(200)
    const inviteId = invite.headers.get("x-request-id")!
    const [invited] = await eventsOf(inviteId)
    const [user] = await admin<{ id: string }>(stack, "SELECT id FROM sys.users WHERE email = $1", [email])
    expect(invited).toMatchObject({ actor_id: adminUser.user.id, actor_role: "admin", action: "user.invite", target: user!.id, details: { role: "staff" } })
    expect(await eventsOf(inviteId)).toHaveLength(1)

    // No request id of the caller's: the event carries the one Plinth made and answered with.
    const verified = await post<SignIn>(stack.main.url, "/auth/magic-link/verify", { token: await mailedToken(stack.mail, email) })
    expect(verified.status).toBe(200)
    const verifyId = verified.headers.get("x-request-id")!
    expect(await eventsOf(verifyId)).toEqual([
      expect.objectContaining({ actor_id: user!.id, actor_role: "staff", action: "user.sign_in", target: user!.id, details: { method: "magic_link" } })
    ])

    const password = await post(stack.main.url, "/auth/set-password", { password: "correct horse" }, { token: verified.body.token })
    expect(password.status).toBe(200)
    expect(await eventsOf(password.headers.get("x-request-id")!)).toEqual([
      expect.objectContaining({ actor_id: user!.id, actor_role: "staff", action: "user.password_set", target: user!.id })
    ])

    const login = await post(stack.main.url, "/auth/login", { email: email.toUpperCase(), password: "correct horse" })
    expect(login.status).toBe(200)
    expect(await eventsOf(login.headers.get("x-request-id")!)).toEqual([
      expect.objectContaining({ actor_id: user!.id, actor_role: "staff", action: "user.sign_in", target: user!.id, details: { method: "password" } })
    ])

    const newEmail = `${fresh("moved")}@plinth.test`
    const requested = await post(stack.main.url, "/auth/change-email", { email: newEmail }, { token: verified.body.token })
    expect(requested.status).toBe(200)
    // The request records nothing: nothing has changed yet.
    expect(await eventsOf(requested.headers.get("x-request-id")!)).toEqual([])
    const confirmed = await post(stack.main.url, "/auth/change-email/verify", { token: await mailedToken(stack.mail, newEmail) })
    expect(confirmed.status).toBe(200)
    expect(await eventsOf(confirmed.headers.get("x-request-id")!)).toEqual([
      expect.objectContaining({ actor_id: user!.id, actor_role: "staff", action: "user.email_change", target: user!.id })
    ])
  })

  it("deactivation, reactivation, a role change and a resent invitation each leave one event; a refused or unchanged one none", async () => {
    const email = `${fresh("managed")}@plinth.test`
    const invite = await post(stack.main.url, "/admin/invite", { email, role: "member" }, { token: owner.token })
    expect(invite.status).toBe(200)
    const [user] = await admin<{ id: string }>(stack, "SELECT id FROM sys.users WHERE email = $1", [email])
    const id = user!.id
    await oneEvent(adminUser, "sys.set_user_active($1, false)", [id], { action: "user.set_active", target: id, details: { active: false } })
    await oneEvent(adminUser, "sys.set_user_active($1, true)", [id], { action: "user.set_active", target: id, details: { active: true } })
    await oneEvent(owner, "sys.set_user_role($1, 'staff')", [id], { action: "user.set_role", target: id, details: { from: "member", to: "staff" } })
    await oneEvent(owner, "(SELECT email FROM sys.resend_invite($1))", [id], { action: "user.resend_invite", target: id })
    // Unchanged (already staff), refused (an admin making an owner; a member managing anyone): none.
    await noEvent(owner, "sys.set_user_role($1, 'staff')", [id], 200)
    await noEvent(adminUser, "sys.set_user_role($1, 'owner')", [id], 403)
    await noEvent(member, "sys.set_user_active($1, false)", [id], 403)
  })

  it("an invite by a database administrator has no actor id and the role administrator", async () => {
    const email = `${fresh("by-dba")}@plinth.test`
    await inviteAsDatabaseAdmin(stack.db, email, "member")
    const [user] = await admin<{ id: string }>(stack, "SELECT id FROM sys.users WHERE email = $1", [email])
    expect(await admin(stack, "SELECT actor_id, actor_role, action, request_id FROM sys.audit_events WHERE target = $1", [user!.id])).toEqual([
      { actor_id: null, actor_role: "administrator", action: "user.invite", request_id: null }
    ])
  })

  it("a failed password sign-in is an event by the address's hash, never the address; a failed magic link, invite or password set leaves none", async () => {
    const email = `${fresh("Guess")}@plinth.test`
    const user = await signedIn(stack, email, "member")
    await post(stack.main.url, "/auth/set-password", { password: "right password" }, { token: user.token })
    for (const [address, password] of [[email, "wrong password"], [`${fresh("nobody")}@plinth.test`, "whatever"]] as const) {
      const refused = await post(stack.main.url, "/auth/login", { email: address, password })
      expect(refused.status).toBe(401)
      const events = await eventsOf(refused.headers.get("x-request-id")!)
      expect(events).toEqual([
        expect.objectContaining({ actor_id: null, actor_role: "anon", action: "user.sign_in_failed", target: emailHash(address), details: { method: "password" } })
      ])
      const stored = JSON.stringify(events, (_, value: unknown) => (typeof value === "bigint" ? String(value) : value)).toLowerCase()
      expect(stored).not.toContain(address.toLowerCase())
      expect(stored).not.toContain(address.split("@")[0]!.toLowerCase())
    }

    // A token that matches no link names nobody: no event.
    const badLink = await post(stack.main.url, "/auth/magic-link/verify", { token: "0".repeat(64) })
    expect(badLink.status).toBe(401)
    expect(await eventsOf(badLink.headers.get("x-request-id")!)).toEqual([])
    const duplicate = await post(stack.main.url, "/admin/invite", { email, role: "member" }, { token: owner.token })
    expect(duplicate.status).toBe(409)
    expect(await eventsOf(duplicate.headers.get("x-request-id")!)).toEqual([])
    const again = await post(stack.main.url, "/auth/set-password", { password: "another password" }, { token: user.token })
    expect(again.status).toBe(409)
    expect(await eventsOf(again.headers.get("x-request-id")!)).toEqual([])
  })

  it("magic links: a request for an unknown or inactive address and a spent link are failed sign-ins by hash; a request for an active user is none", async () => {
    const failedBy = async (response: { readonly headers: Headers }, address: string) => {
      const events = await eventsOf(response.headers.get("x-request-id")!)
      expect(events).toEqual([
        expect.objectContaining({ actor_id: null, actor_role: "anon", action: "user.sign_in_failed", target: emailHash(address), details: { method: "magic_link" } })
      ])
      expect(JSON.stringify(events, (_, value: unknown) => (typeof value === "bigint" ? String(value) : value))).not.toContain(address.split("@")[0]!)
    }
    const unknown = `${fresh("stranger")}@plinth.test`
    const asked = await post(stack.main.url, "/auth/magic-link", { email: unknown })
    expect(asked.body).toEqual({ sent: true })
    await failedBy(asked, unknown)

    const email = `${fresh("leaver")}@plinth.test`
    const token = await inviteAsDatabaseAdmin(stack.db, email, "member")
    const active = await post(stack.main.url, "/auth/magic-link", { email })
    expect(active.body).toEqual({ sent: true })
    expect(await eventsOf(active.headers.get("x-request-id")!)).toEqual([])
    await verify(stack.main.url, token)
    const spent = await post(stack.main.url, "/auth/magic-link/verify", { token })
    expect(spent.status).toBe(401)
    await failedBy(spent, email)

    await admin(stack, "UPDATE sys.users SET is_active = false WHERE email = $1", [email])
    const inactive = await post(stack.main.url, "/auth/magic-link", { email })
    expect(inactive.body).toEqual({ sent: true })
    await failedBy(inactive, email)
  })
})

describe("through the chat service's tools", () => {
  const runTool = async (name: string, input: Record<string, unknown>, requestId: string) => {
    const conversationId = await newConversation(stack, owner.token, name)
    turns.push(toolUse(`toolu_${fresh(name)}`, name, input, `Running ${name}.`), text(`Finished ${name}.`))
    const reply = await chat(stack, owner, conversationId, `Please ${name}`, { "x-request-id": requestId })
    expect(reply.status).toBe(200)
    expect(turns.left()).toBe(0)
    return reply
  }

  it("a tool's change carries the caller as actor and the chat request's id; a failing tool leaves none", async () => {
    const table = fresh("chat_audited")
    const requestId = `chat-${randomUUID()}`
    await runTool("propose_create_table", { table_name: table, columns: [{ name: "title", type: "text" }] }, requestId)
    expect(await eventsOf(requestId)).toEqual([
      expect.objectContaining({ actor_id: owner.user.id, actor_role: "owner", action: "table.create", target: `public.${table}` })
    ])

    const displayId = `chat-${randomUUID()}`
    await runTool("configure_fk_display", { table_name: table, columns: ["title"] }, displayId)
    expect(await eventsOf(displayId)).toEqual([
      expect.objectContaining({ actor_id: owner.user.id, action: "table.alter", target: `public.${table}` })
    ])

    const failingId = `chat-${randomUUID()}`
    await runTool("propose_drop_table", { table_name: fresh("no_such_table") }, failingId)
    expect(await eventsOf(failingId)).toEqual([])
  })
})

describe("reading the trail", () => {
  it("sys.list_audit_events: owners and admins, newest first, bounded; staff and members 403", async () => {
    const first = await oneEvent(owner, "sys.create_page($1, $2, $3)", [fresh("list-a").replaceAll("_", "-"), "", ""], { action: "page.create" })
    const second = await oneEvent(owner, "sys.create_page($1, $2, $3)", [fresh("list-b").replaceAll("_", "-"), "", ""], { action: "page.create" })
    for (const reader of [owner, adminUser]) {
      const listed = await sqlWithId(reader, "SELECT * FROM sys.list_audit_events(NULL, 2)")
      expect(listed.status).toBe(200)
      // Newest first; reading is no event itself.
      expect(listed.body.rows!.map((row) => String(row["id"]))).toEqual([String(second.id), String(first.id)])
    }
    for (const reader of [staff, member]) {
      const refused = await sqlWithId(reader, "SELECT * FROM sys.list_audit_events(NULL, 10)")
      expect(refused.status).toBe(403)
      expect(refused.body.error?.code).toBe("42501")
    }
    expect((await sqlWithId(owner, "SELECT * FROM sys.list_audit_events(NULL, 1001)")).status).toBe(400)
    expect((await sqlWithId(owner, "SELECT * FROM sys.list_audit_events(NULL, 0)")).status).toBe(400)
    expect((await sqlWithId(owner, "SELECT count(*)::int AS n FROM sys.list_audit_events()")).body.rows![0]!["n"]).toBeLessThanOrEqual(100)
  })

  it("GET /admin/audit: owners and admins, since and limit, bounded; others 403, no token 401", async () => {
    const before = new Date(Date.now() - 1000).toISOString()
    const event = await oneEvent(adminUser, "sys.create_page($1, $2, $3)", [fresh("http").replaceAll("_", "-"), "", ""], { action: "page.create" })
    for (const reader of [owner, adminUser]) {
      const listed = await get<{ events: Array<Record<string, unknown>> }>(stack.main.url, `/admin/audit?since=${encodeURIComponent(before)}&limit=1000`, reader.token)
      expect(listed.status).toBe(200)
      const found = listed.body.events.find((e) => e["id"] === Number(event.id))
      expect(found).toEqual({
        id: Number(event.id),
        at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z$/),
        actor_id: adminUser.user.id,
        actor_role: "admin",
        action: "page.create",
        target: event.target,
        details: event.details,
        request_id: event.request_id
      })
      expect(Math.abs(Date.parse(String(found!["at"])) - event.at.getTime())).toBeLessThan(1)
      const ats = listed.body.events.map((e) => Date.parse(String(e["at"])))
      expect([...ats].sort((a, b) => b - a)).toEqual(ats)
      expect(ats.every((at) => at >= Date.parse(before))).toBe(true)
    }
    const one = await get<{ events: Array<unknown> }>(stack.main.url, "/admin/audit?limit=1", owner.token)
    expect(one.status).toBe(200)
    expect(one.body.events).toHaveLength(1)
    const future = await get<{ events: Array<unknown> }>(stack.main.url, "/admin/audit?since=2999-01-01", owner.token)
    expect(future.body).toEqual({ events: [] })
    for (const query of ["limit=0", "limit=1001", "limit=ten", "limit=1.5", "since=yesterday"]) {
      const bad = await get<{ error: string }>(stack.main.url, `/admin/audit?${query}`, owner.token)
      expect(bad.status, query).toBe(400)
      expect(bad.body.error).toMatch(/^invalid query: /)
    }
    expect((await get(stack.main.url, "/admin/audit", staff.token)).status).toBe(403)
    expect((await get(stack.main.url, "/admin/audit", member.token)).status).toBe(403)
    expect((await get(stack.main.url, "/admin/audit")).status).toBe(401)
  })
})

describe("append-only", () => {
  it("nobody writes the table through Plinth: no INSERT, UPDATE, DELETE or TRUNCATE, nor the append or prune functions", async () => {
    const [{ n: count }] = (await admin<{ n: number }>(stack, "SELECT count(*)::int AS n FROM sys.audit_events")) as [{ n: number }]
    expect(count).toBeGreaterThan(0)
    for (const statement of [
      "UPDATE sys.audit_events SET action = 'forged'",
      "DELETE FROM sys.audit_events",
      "INSERT INTO sys.audit_events (actor_role, action) VALUES ('owner', 'forged')",
      "SELECT * FROM sys.audit_events",
      "SELECT sys.record_audit_event('forged', NULL, '{}')",
      "SELECT sys.prune_audit_events(now())"
    ]) {
      const response = await sqlWithId(owner, statement)
      expect(response.status, statement).toBe(403)
    }
    // TRUNCATE is no statement /sql runs at all.
    expect((await sqlWithId(owner, "TRUNCATE sys.audit_events")).status).toBe(400)
    // Even a database administrator may not change or delete events but by pruning.
    for (const statement of ["UPDATE sys.audit_events SET action = 'forged'", "DELETE FROM sys.audit_events", "TRUNCATE sys.audit_events"]) {
      expect(await serverError(admin(stack, statement)), statement).toMatch(/^the audit trail is append-only/)
    }
    expect((await admin<{ n: number }>(stack, "SELECT count(*)::int AS n FROM sys.audit_events"))[0]!.n).toBeGreaterThanOrEqual(count)
    expect(await admin(stack, "SELECT FROM sys.audit_events WHERE action = 'forged'")).toEqual([])
  })
})

describe("plinth audit prune", () => {
  const plinth = async (args: ReadonlyArray<string>) => {
    const run = runPlinth(args, { DATABASE_URL: stack.db.mainUrl, DATABASE_ADMIN_URL: stack.db.adminUrl, APP_URL: "http://app.test" })
    const code = await run.exited
    return { code, stdout: run.stdout(), stderr: run.stderr() }
  }

  it("deletes the events older than --before, prints how many, and records the prune", async () => {
    // Old events, as if written years ago (only a superuser can).
    await admin(stack, "INSERT INTO sys.audit_events (at, actor_role, action) VALUES ('2001-05-01T00:00:00Z', 'owner', 'old.one'), ('2001-06-01T00:00:00Z', 'owner', 'old.two'), ('2003-01-01T00:00:00Z', 'owner', 'old.three')")
    const total = (await admin<{ n: number }>(stack, "SELECT count(*)::int AS n FROM sys.audit_events"))[0]!.n

    const pruned = await plinth(["audit", "prune", "--before", "2002-01-01"])
    expect(pruned.stderr).toBe("")
    expect(pruned.code).toBe(0)
    expect(pruned.stdout.trim()).toBe("Deleted 2 audit events older than 2002-01-01T00:00:00.000Z.")
    expect((await admin<{ action: string }>(stack, "SELECT action FROM sys.audit_events WHERE action LIKE 'old.%'")).map((row) => row.action)).toEqual(["old.three"])
    expect(await admin(stack, "SELECT actor_id, actor_role, details FROM sys.audit_events WHERE action = 'audit.prune'")).toEqual([
      { actor_id: null, actor_role: "administrator", details: { before: "2002-01-01T00:00:00Z", deleted: 2 } }
    ])
    expect((await admin<{ n: number }>(stack, "SELECT count(*)::int AS n FROM sys.audit_events"))[0]!.n).toBe(total - 2 + 1)
  }, 60_000)

  it("refuses a date it cannot read, in one line", async () => {
    const bad = await plinth(["audit", "prune", "--before", "last year"])
    expect(bad.code).toBe(1)
    expect(bad.stderr.trim()).toBe("plinth: invalid date: \"last year\" (use 2026-01-01 or 2026-01-01T12:00:00Z)")
  }, 60_000)
})
