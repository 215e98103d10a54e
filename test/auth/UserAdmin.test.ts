/**
 * User administration (issue #24): every rule, for every role of caller × action × kind of target,
 * through POST /sql (the sys functions) and through the HTTP endpoints alike; then what the rules
 * do not cover by the table (bodies, unknown users, mail failures, a deactivated caller, two owners
 * demoting each other at once), and the full offboarding flow.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  type AuthStack,
  inviteAsDatabaseAdmin,
  mailedToken,
  post,
  type SignIn,
  signedIn,
  startAuthStack,
  verify
} from "../support/auth.ts"
import { query } from "../support/database.ts"
import { eventually } from "../support/eventually.ts"
import { get } from "../support/http.ts"

let stack: AuthStack
let base: string

beforeAll(async () => {
  stack = await startAuthStack()
  base = stack.main.url
})
afterAll(() => stack?.close())

let counter = 0
const fresh = (label: string) => `${label}-${++counter}@users.test`

type Role = "owner" | "admin" | "staff" | "member"
type Action = "deactivate" | "activate" | "role:owner" | "role:admin" | "role:staff" | "role:member" | "resend"
type Target = "self" | "owner" | "admin" | "staff" | "member" | "last active owner"
type Transport = "sql" | "http"

const ROLES: ReadonlyArray<Role> = ["owner", "admin", "staff", "member"]
const ACTIONS: ReadonlyArray<Action> = ["deactivate", "activate", "role:owner", "role:admin", "role:staff", "role:member", "resend"]
const TARGETS: ReadonlyArray<Target> = ["self", "owner", "admin", "staff", "member", "last active owner"]

const isStaffOrMember = (role: Role) => role === "staff" || role === "member"

/**
 * The rules of issue #24 as a table: the status of `actor` doing `action` to `target`, and what
 * the refusal says. For an owner, the last active owner is themselves; every other target is
 * one of several active owners or no owner.
 */
const expected = (actor: Role, action: Action, target: Target): { readonly status: number; readonly says?: RegExp } => {
  if (isStaffOrMember(actor)) return { status: 403 }
  const self = target === "self" || (target === "last active owner" && actor === "owner")
  const last = target === "last active owner"
  const targetRole: Role = target === "self" ? actor : last ? "owner" : target
  if (actor === "admin" && !isStaffOrMember(targetRole)) return { status: 403, says: self ? /your own account/ : /only staff and members/ }
  if (action === "activate") return { status: 200 }
  if (action === "resend") return self ? { status: 409, says: /has signed in already/ } : { status: 200 }
  if (action === "deactivate") {
    if (last) return { status: 409, says: /last active owner/ }
    return self ? { status: 403, says: /cannot deactivate yourself/ } : { status: 200 }
  }
  const role = action.slice("role:".length) as Role
  if (actor === "admin" && !isStaffOrMember(role)) return { status: 403, says: /may not make anyone/ }
  if (role === targetRole) return { status: 200 }
  if (last) return { status: 409, says: /last active owner/ }
  return self ? { status: 403, says: /your own role/ } : { status: 200 }
}

const request = async (method: string, path: string, token: string, body?: unknown) => {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  return { status: response.status, body: (text === "" ? undefined : JSON.parse(text)) as Record<string, unknown> }
}

const sqlAs = (token: string, sql: string, params: ReadonlyArray<unknown> = []) =>
  post<{ rows?: ReadonlyArray<Record<string, unknown>>; error?: { message: string; code: string } }>(base, "/sql", { sql, params }, { token })

/** The refusal's text, whichever shape (`{error}` or the database's `{error: {message}}`) it came in. */
const errorText = (body: unknown): string => {
  const error = (body as { error?: unknown } | undefined)?.error
  return typeof error === "string" ? error : (error as { message?: string } | undefined)?.message ?? ""
}

/** `action` on `targetId` as `token`, through `transport`: the status and the body. */
const perform = async (transport: Transport, token: string, action: Action | "list", targetId: string) => {
  if (transport === "sql") {
    switch (action) {
      case "list":
        return sqlAs(token, "SELECT * FROM sys.list_users()")
      case "deactivate":
      case "activate":
        return sqlAs(token, "SELECT * FROM sys.set_user_active($1, $2)", [targetId, action === "activate"])
      case "resend":
        return sqlAs(token, "SELECT * FROM sys.resend_invite($1)", [targetId])
      default:
        return sqlAs(token, "SELECT * FROM sys.set_user_role($1, $2)", [targetId, action.slice("role:".length)])
    }
  }
  switch (action) {
    case "list":
      return request("GET", "/admin/users", token)
    case "deactivate":
    case "activate":
      return request("PATCH", `/admin/users/${targetId}`, token, { is_active: action === "activate" })
    case "resend":
      return request("POST", `/admin/users/${targetId}/resend-invite`, token)
    default:
      return request("PATCH", `/admin/users/${targetId}`, token, { role: action.slice("role:".length) })
  }
}

const userRow = async (id: string) => {
  const [row] = await query(stack.db.adminUrl, (sql) =>
    sql<{ role: Role; is_active: boolean; email: string }>`SELECT role, is_active, email FROM sys.users WHERE id = ${id}`)
  return row!
}

const invited = async (role: Role) => {
  const email = fresh(role)
  await inviteAsDatabaseAdmin(stack.db, email, role)
  const [row] = await query(stack.db.adminUrl, (sql) => sql<{ id: string }>`SELECT id FROM sys.users WHERE email = ${email}`)
  return row!.id
}

/**
 * A world of its own for one case: everyone earlier is deactivated, then a signed-in actor and the
 * target (invited, never signed in). Unless the target is the last active owner, another active
 * owner stands by, so nobody else is the last one.
 */
const world = async (actor: Role, action: Action, target: Target) => {
  await query(stack.db.adminUrl, (sql) => sql`UPDATE sys.users SET is_active = false`)
  const me = await signedIn(stack, fresh(`actor-${actor}`), actor)
  if (target !== "last active owner") await invited("owner")
  const targetId = target === "self" || (target === "last active owner" && actor === "owner")
    ? me.user.id
    : await invited(target === "last active owner" ? "owner" : target)
  if (action === "activate" && targetId !== me.user.id) {
    await query(stack.db.adminUrl, (sql) => sql`UPDATE sys.users SET is_active = false WHERE id = ${targetId}`)
  }
  return { me, targetId }
}

const cases = ROLES.flatMap((actor) => ACTIONS.flatMap((action) => TARGETS.map((target) => ({ actor, action, target }))))

describe.each<Transport>(["sql", "http"])("every rule, through %s", (transport) => {
  it.each(ROLES)("list as %s", async (actor) => {
    await query(stack.db.adminUrl, (sql) => sql`UPDATE sys.users SET is_active = false`)
    const me = await signedIn(stack, fresh(`lister-${actor}`), actor)
    const response = await perform(transport, me.token, "list", "")
    expect(response.status).toBe(isStaffOrMember(actor) ? 403 : 200)
    if (response.status !== 200) return
    const rows = (transport === "sql" ? (response.body as { rows: unknown }).rows : response.body) as ReadonlyArray<Record<string, unknown>>
    expect(rows.find((row) => row["id"] === me.user.id)).toEqual({
      id: me.user.id,
      email: me.user.email,
      display_name: me.user.display_name,
      role: actor,
      is_active: true,
      needs_password: true,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT[\d:.]+Z$/),
      last_sign_in_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT[\d:.]+Z$/),
      invited_by: null
    })
  })

  it.each(cases)("$actor: $action of $target", async ({ actor, action, target }) => {
    const { me, targetId } = await world(actor, action, target)
    const before = await userRow(targetId)
    const mailsBefore = stack.mail.messages.length
    const response = await perform(transport, me.token, action, targetId)
    const want = expected(actor, action, target)
    expect(response.status, JSON.stringify(response.body)).toBe(want.status)
    const after = await userRow(targetId)
    if (want.status !== 200) {
      if (want.says !== undefined) expect(errorText(response.body)).toMatch(want.says)
      expect(after).toEqual(before)
      expect(stack.mail.messages.length).toBe(mailsBefore)
      return
    }
    if (action === "resend") {
      // The link works: mailed (HTTP), or handed back (SQL).
      const token = transport === "http"
        ? await mailedToken(stack.mail, before.email)
        : ((response.body as { rows: ReadonlyArray<{ token: string; email: string }> }).rows[0]!.token)
      expect((await verify(base, token)).user.id).toBe(targetId)
      return
    }
    const role = action.startsWith("role:") ? action.slice("role:".length) : before.role
    const active = action === "deactivate" ? false : action === "activate" ? true : before.is_active
    expect(after).toEqual({ ...before, role, is_active: active })
    const row = transport === "sql" ? (response.body as { rows: ReadonlyArray<unknown> }).rows[0] : response.body
    expect(row).toMatchObject({ id: targetId, role, is_active: active })
  })
})
