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

/** A fresh world with a signed-in owner (and another active owner standing by). */
const ownerWorld = async () => {
  await query(stack.db.adminUrl, (sql) => sql`UPDATE sys.users SET is_active = false`)
  const owner = await signedIn(stack, fresh("owner"), "owner")
  await invited("owner")
  return owner
}

describe("what the table does not cover", () => {
  it("the functions are SECURITY DEFINER with a pinned search_path, for owners and admins only", async () => {
    for (const signature of ["sys.list_users()", "sys.set_user_active(uuid, boolean)", "sys.set_user_role(uuid, text)", "sys.resend_invite(uuid)"]) {
      const [row] = await query(stack.db.adminUrl, (sql) =>
        sql<{ definer: boolean; pinned: boolean; roles: Array<string> }>`
          SELECT p.prosecdef AS definer, coalesce(array_to_string(p.proconfig, ',') LIKE '%search_path=%', false) AS pinned,
            ARRAY(SELECT r FROM unnest(ARRAY['owner', 'admin', 'staff', 'member', 'anon', 'authenticator', 'chat_authenticator']) AS r
              WHERE has_function_privilege(r, p.oid, 'EXECUTE') ORDER BY r) AS roles
          FROM pg_proc p WHERE p.oid = ${signature}::regprocedure`)
      expect(row, signature).toEqual({ definer: true, pinned: true, roles: ["admin", "owner"] })
    }
  })

  it("PATCH: a body that changes nothing or holds a bad value is 400, a bad role 400, an id that names nobody 404; both fields change in one call", async () => {
    const owner = await ownerWorld()
    const member = await invited("member")
    for (const body of [{}, { active: false }, { role: "root" }, { is_active: "no" }, { role: null }]) {
      const response = await request("PATCH", `/admin/users/${member}`, owner.token, body)
      expect(response.status, JSON.stringify(body)).toBe(400)
      expect(errorText(response.body)).not.toBe("")
    }
    expect((await request("PATCH", "/admin/users/not-a-uuid", owner.token, { is_active: false })).status).toBe(404)
    expect((await request("PATCH", "/admin/users/00000000-0000-4000-8000-000000000000", owner.token, { is_active: false })).status).toBe(404)
    expect((await request("POST", "/admin/users/00000000-0000-4000-8000-000000000000/resend-invite", owner.token)).status).toBe(404)
    expect(await userRow(member)).toMatchObject({ role: "member", is_active: true })

    const both = await request("PATCH", `/admin/users/${member}`, owner.token, { role: "staff", is_active: false })
    expect(both).toMatchObject({ status: 200, body: { id: member, role: "staff", is_active: false } })
  })

  it("through /sql: an unknown user is P0002, a bad role 22023, a null active 22023", async () => {
    const owner = await ownerWorld()
    const member = await invited("member")
    expect((await sqlAs(owner.token, "SELECT * FROM sys.set_user_active('00000000-0000-4000-8000-000000000000', false)")).body.error?.code).toBe("P0002")
    expect((await sqlAs(owner.token, "SELECT * FROM sys.set_user_role($1, 'root')", [member])).body.error?.code).toBe("22023")
    expect((await sqlAs(owner.token, "SELECT * FROM sys.set_user_active($1, NULL)", [member])).body.error?.code).toBe("22023")
  })

  it("without a JWT every endpoint is 401", async () => {
    expect((await get(base, "/admin/users")).status).toBe(401)
    const patch = await fetch(`${base}/admin/users/00000000-0000-4000-8000-000000000000`, { method: "PATCH", headers: { "content-type": "application/json" }, body: "{\"is_active\":false}" })
    expect(patch.status).toBe(401)
    expect((await post(base, "/admin/users/00000000-0000-4000-8000-000000000000/resend-invite", {})).status).toBe(401)
  })

  it("resend-invite: 502 when the mail fails, and nothing is lost: sent again, the link signs in", async () => {
    const owner = await ownerWorld()
    const member = await invited("member")
    const { email } = await userRow(member)
    stack.mail.failNext(1, 400) // a 4xx is not retried: the failure is immediate
    const failed = await request("POST", `/admin/users/${member}/resend-invite`, owner.token)
    expect(failed.status).toBe(502)
    expect(errorText(failed.body)).toMatch(/could not be sent/)
    expect(await request("POST", `/admin/users/${member}/resend-invite`, owner.token)).toMatchObject({ status: 200, body: { ok: true } })
    const signIn = await verify(base, await mailedToken(stack.mail, email))
    expect(signIn.user.id).toBe(member)
    // Signed in now: no more invitations (its token would sign whoever asked in as them).
    const again = await request("POST", `/admin/users/${member}/resend-invite`, owner.token)
    expect(again.status).toBe(409)
    expect(errorText(again.body)).toMatch(/has signed in already/)
  })

  it("resend-invite to a deactivated user is 409 saying so", async () => {
    const owner = await ownerWorld()
    const member = await invited("member")
    await request("PATCH", `/admin/users/${member}`, owner.token, { is_active: false })
    const response = await request("POST", `/admin/users/${member}/resend-invite`, owner.token)
    expect(response.status).toBe(409)
    expect(errorText(response.body)).toMatch(/is deactivated/)
  })

  it("a deactivated or demoted admin's JWT, still valid, manages nobody", async () => {
    const owner = await ownerWorld()
    const admin = await signedIn(stack, fresh("admin"), "admin")
    const member = await invited("member")
    expect((await request("PATCH", `/admin/users/${admin.user.id}`, owner.token, { is_active: false })).status).toBe(200)
    const refused = await request("PATCH", `/admin/users/${member}`, admin.token, { is_active: false })
    expect(refused.status).toBe(403)
    expect(errorText(refused.body)).toMatch(/deactivated or its role changed/)
    expect((await request("GET", "/admin/users", admin.token)).status).toBe(403)

    expect((await request("PATCH", `/admin/users/${admin.user.id}`, owner.token, { is_active: true, role: "staff" })).status).toBe(200)
    expect((await request("PATCH", `/admin/users/${member}`, admin.token, { is_active: false })).status).toBe(403)
    expect(await userRow(member)).toMatchObject({ is_active: true })
  })

  it("two owners demoting each other at once: one wins, and an active owner remains", async () => {
    await query(stack.db.adminUrl, (sql) => sql`UPDATE sys.users SET is_active = false`)
    const a = await signedIn(stack, fresh("owner-a"), "owner")
    const b = await signedIn(stack, fresh("owner-b"), "owner")
    const results = await Promise.all([
      sqlAs(a.token, "SELECT * FROM sys.set_user_role($1, 'member')", [b.user.id]),
      sqlAs(b.token, "SELECT * FROM sys.set_user_role($1, 'member')", [a.user.id])
    ])
    // The loser either ran second (it is no owner any more: 403) or at the same time (409).
    const [winner, loser] = results[0]!.status === 200 ? results : [results[1]!, results[0]!]
    expect(winner!.status).toBe(200)
    expect([403, 409]).toContain(loser!.status)
    expect(loser!.body.error?.message).toMatch(loser!.status === 409 ? /last active owner/ : /role changed/)
    const [owners] = await query(stack.db.adminUrl, (sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM sys.users WHERE role = 'owner' AND is_active`)
    expect(owners!.n).toBe(1)
  })

  it("invited_by names the inviter; last_sign_in_at is set by each sign-in (magic link, password)", async () => {
    const owner = await ownerWorld()
    const email = fresh("invitee")
    expect((await post(base, "/admin/invite", { email, role: "staff" }, { token: owner.token })).status).toBe(200)
    const listed = async () =>
      ((await request("GET", "/admin/users", owner.token)).body as unknown as ReadonlyArray<Record<string, unknown>>).find((row) => row["email"] === email)!
    expect(await listed()).toMatchObject({ invited_by: owner.user.id, last_sign_in_at: null, needs_password: true })
    const staff = await verify(base, await mailedToken(stack.mail, email))
    const first = (await listed())["last_sign_in_at"] as string
    expect(first).toMatch(/Z$/)
    expect((await post(base, "/auth/set-password", { password: "correct horse" }, { token: staff.token })).status).toBe(200)
    expect((await post(base, "/auth/login", { email, password: "correct horse" })).status).toBe(200)
    const second = await listed()
    expect(second).toMatchObject({ needs_password: false })
    expect(Date.parse(second["last_sign_in_at"] as string)).toBeGreaterThan(Date.parse(first))
  })
})

describe("offboarding", () => {
  it("owner deactivates a member: no link is mailed, an earlier link is 401, the JWT works until it expires; reactivation restores sign-in", async () => {
    const owner = await ownerWorld()
    const email = fresh("leaver")
    const member: SignIn = await signedIn(stack, email, "member")
    const bystander = fresh("bystander")
    await inviteAsDatabaseAdmin(stack.db, bystander, "member")

    // A link asked for before the deactivation, not yet followed.
    expect((await post(base, "/auth/magic-link", { email })).status).toBe(200)
    const earlier = await mailedToken(stack.mail, email)

    expect(await request("PATCH", `/admin/users/${member.user.id}`, owner.token, { is_active: false }))
      .toMatchObject({ status: 200, body: { is_active: false } })

    const mailsToLeaver = stack.mail.messages.filter((m) => m.to === email).length
    expect(await post(base, "/auth/magic-link", { email })).toMatchObject({ status: 200, body: { sent: true } })
    // Mails go out after the answer: once the bystander's (asked for after) has arrived, the leaver's would have.
    expect((await post(base, "/auth/magic-link", { email: bystander })).status).toBe(200)
    expect(await eventually(async () => stack.mail.messages.some((m) => m.to === bystander))).toBe(true)
    expect(stack.mail.messages.filter((m) => m.to === email)).toHaveLength(mailsToLeaver)

    expect((await post(base, "/auth/magic-link/verify", { token: earlier })).status).toBe(401)

    // Issued JWTs stay valid until they expire (JWT_TTL).
    expect(await sqlAs(member.token, "SELECT 1 AS one")).toMatchObject({ status: 200, body: { rows: [{ one: 1 }] } })

    expect(await request("PATCH", `/admin/users/${member.user.id}`, owner.token, { is_active: true }))
      .toMatchObject({ status: 200, body: { is_active: true } })
    expect((await post(base, "/auth/magic-link", { email })).status).toBe(200)
    await eventually(async () => stack.mail.messages.filter((m) => m.to === email).length > mailsToLeaver)
    const back = await verify(base, await mailedToken(stack.mail, email))
    expect(back.user).toMatchObject({ id: member.user.id, role: "member" })
  })
})
