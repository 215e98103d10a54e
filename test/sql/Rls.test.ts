/**
 * Row-level security through POST /sql: every request runs as its caller (role and app.user_id),
 * so a policy on `created_by = current_setting('app.user_id')::uuid` gives each member exactly
 * their own rows. A property test drives random members through random inserts, updates and
 * deletes and compares what each one sees with a model.
 */
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, type SignIn, signedIn, startAuthStack } from "../support/auth.ts"
import { query } from "../support/database.ts"
import { BUSINESS_FIXTURES, type DatabaseErrorBody, ddl, type SqlResult, sqlRequest } from "./fixtures.ts"

let stack: AuthStack
let members: ReadonlyArray<SignIn>
let staff: SignIn
let owner: SignIn

beforeAll(async () => {
  stack = await startAuthStack()
  await ddl(stack, BUSINESS_FIXTURES)
  members = await Promise.all([1, 2, 3, 4].map((n) => signedIn(stack, `member-${n}@plinth.test`, "member")))
  staff = await signedIn(stack, "staff@plinth.test", "staff")
  owner = await signedIn(stack, "owner@plinth.test", "owner")
})
afterAll(() => stack?.close())

const run = <T = SqlResult>(who: SignIn, sql: string, params?: ReadonlyArray<unknown>) =>
  sqlRequest<T>(stack.main.url, who.token, sql, params)

interface Note {
  readonly id: number
  readonly body: string
  readonly created_by: string
}

const visibleTo = async (who: SignIn): Promise<ReadonlyArray<Note>> => {
  const response = await run<SqlResult<Note>>(who, "SELECT id, body, created_by FROM notes ORDER BY id")
  expect(response.status).toBe(200)
  expect(response.body.rowCount).toBe(response.body.rows.length)
  return response.body.rows
}

describe("fixed cases", () => {
  it("a member sees their own note and not another member's", async () => {
    const [alice, bob] = [members[0]!, members[1]!]
    expect(await run(alice, "INSERT INTO notes (body) VALUES ($1)", ["alice's fixed note"]))
      .toMatchObject({ status: 200, body: { rows: [], rowCount: 1 } })
    const asAlice = await run<SqlResult<Note>>(alice, "SELECT body, created_by FROM notes WHERE body = $1", ["alice's fixed note"])
    expect(asAlice.status).toBe(200)
    expect(asAlice.body).toEqual({ rows: [{ body: "alice's fixed note", created_by: alice.user.id }], rowCount: 1 })
    const asBob = await run(bob, "SELECT body FROM notes WHERE body = $1", ["alice's fixed note"])
    expect(asBob.status).toBe(200)
    expect(asBob.body).toEqual({ rows: [], rowCount: 0 })
    expect(await run(bob, "UPDATE notes SET body = 'taken' WHERE body = $1", ["alice's fixed note"]))
      .toMatchObject({ status: 200, body: { rows: [], rowCount: 0 } })
    expect(await run(bob, "DELETE FROM notes WHERE body = $1", ["alice's fixed note"]))
      .toMatchObject({ status: 200, body: { rows: [], rowCount: 0 } })
    expect((await run<SqlResult>(alice, "SELECT body FROM notes WHERE body = $1", ["alice's fixed note"])).body.rowCount).toBe(1)
    expect(await run(alice, "DELETE FROM notes WHERE body = $1", ["alice's fixed note"]))
      .toMatchObject({ status: 200, body: { rows: [], rowCount: 1 } })
  })

  it("inserting a row in another member's name violates the policy: 403 42501", async () => {
    const [alice, bob] = [members[0]!, members[1]!]
    const response = await run<DatabaseErrorBody>(alice, "INSERT INTO notes (body, created_by) VALUES ($1, $2)", ["forged", bob.user.id])
    expect(response.status).toBe(403)
    expect(response.body).toEqual({
      error: { message: "new row violates row-level security policy for table \"notes\"", code: "42501", detail: null, hint: null, position: null }
    })
    expect(await visibleTo(bob)).toEqual([])
  })

  it("moving one's own row to another member violates the policy: 403 42501, and the row stays", async () => {
    const [alice, bob] = [members[0]!, members[1]!]
    await run(alice, "INSERT INTO notes (body) VALUES ($1)", ["to be moved"])
    const response = await run<DatabaseErrorBody>(alice, "UPDATE notes SET created_by = $1 WHERE body = $2", [bob.user.id, "to be moved"])
    expect(response.status).toBe(403)
    expect(response.body).toMatchObject({ error: { code: "42501", message: expect.stringContaining("row-level security") } })
    expect((await visibleTo(alice)).map((note) => note.body)).toContain("to be moved")
    expect(await run(alice, "DELETE FROM notes WHERE body = $1", ["to be moved"])).toMatchObject({ status: 200, body: { rowCount: 1 } })
  })

  it("staff are filtered by the same policy; a role without a grant gets 403", async () => {
    await run(staff, "INSERT INTO notes (body) VALUES ($1)", ["staff note"])
    const asStaff = await run(staff, "SELECT body, created_by FROM notes")
    expect(asStaff.status).toBe(200)
    expect(asStaff.body).toEqual({ rows: [{ body: "staff note", created_by: staff.user.id }], rowCount: 1 })
    const asOwner = await run<DatabaseErrorBody>(owner, "SELECT * FROM notes")
    expect(asOwner.status).toBe(403)
    expect(asOwner.body).toMatchObject({ error: { code: "42501", message: "permission denied for table notes" } })
    expect(await run(staff, "DELETE FROM notes")).toMatchObject({ status: 200, body: { rows: [], rowCount: 1 } })
  })
})

type Op =
  | { readonly kind: "insert"; readonly user: number; readonly text: string }
  | { readonly kind: "update"; readonly user: number; readonly ref: number; readonly text: string }
  | { readonly kind: "delete"; readonly user: number; readonly ref: number }
  | { readonly kind: "touchAll"; readonly user: number }
  | { readonly kind: "deleteAll"; readonly user: number }

const text = fc.string({ unit: "grapheme", maxLength: 12 }).filter((s) => !s.includes("\u0000"))
const user = fc.nat({ max: 3 })
const ref = fc.nat({ max: 50 })
const op: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: fc.record({ kind: fc.constant("insert" as const), user, text }), weight: 4 },
  { arbitrary: fc.record({ kind: fc.constant("update" as const), user, ref, text }), weight: 3 },
  { arbitrary: fc.record({ kind: fc.constant("delete" as const), user, ref }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant("touchAll" as const), user }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant("deleteAll" as const), user }), weight: 1 }
)

describe("property: each member sees exactly their own surviving rows", () => {
  it("holds for random members and random sequences of writes", async () => {
    let serial = 0
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 2, max: 4 }), fc.array(op, { minLength: 1, maxLength: 16 }), async (count, ops) => {
        await ddl(stack, "TRUNCATE public.notes RESTART IDENTITY")
        const crew = members.slice(0, count)
        /** id → note, as the model expects it; `ids` also keeps the ids of deleted notes. */
        const model = new Map<number, Note>()
        const ids: Array<number> = []
        const who = (index: number) => crew[index % crew.length]!
        const target = (index: number) => (ids.length === 0 ? 0 : ids[index % ids.length]!)
        const own = (me: SignIn) => [...model.values()].filter((note) => note.created_by === me.user.id)

        for (const step of ops) {
          const me = who(step.user)
          switch (step.kind) {
            case "insert": {
              const body = `${++serial}:${step.text}`
              expect(await run(me, "INSERT INTO notes (body) VALUES ($1)", [body]))
                .toMatchObject({ status: 200, body: { rows: [], rowCount: 1 } })
              const found = await run<SqlResult<{ id: number }>>(me, "SELECT id FROM notes WHERE body = $1", [body])
              expect(found.status).toBe(200)
              expect(found.body.rowCount).toBe(1)
              const id = found.body.rows[0]!.id
              model.set(id, { id, body, created_by: me.user.id })
              ids.push(id)
              break
            }
            case "update": {
              const id = target(step.ref)
              const body = `${++serial}:${step.text}`
              const mine = model.get(id)?.created_by === me.user.id
              expect(await run(me, "UPDATE notes SET body = $1 WHERE id = $2", [body, id]))
                .toMatchObject({ status: 200, body: { rows: [], rowCount: mine ? 1 : 0 } })
              if (mine) model.set(id, { ...model.get(id)!, body })
              break
            }
            case "delete": {
              const id = target(step.ref)
              const mine = model.get(id)?.created_by === me.user.id
              expect(await run(me, "DELETE FROM notes WHERE id = $1", [id]))
                .toMatchObject({ status: 200, body: { rows: [], rowCount: mine ? 1 : 0 } })
              if (mine) model.delete(id)
              break
            }
            case "touchAll": {
              const expected = own(me)
              expect(await run(me, "UPDATE notes SET body = body || '!'"))
                .toMatchObject({ status: 200, body: { rows: [], rowCount: expected.length } })
              for (const note of expected) model.set(note.id, { ...note, body: `${note.body}!` })
              break
            }
            case "deleteAll": {
              const expected = own(me)
              expect(await run(me, "DELETE FROM notes"))
                .toMatchObject({ status: 200, body: { rows: [], rowCount: expected.length } })
              for (const note of expected) model.delete(note.id)
              break
            }
          }
        }

        for (const me of crew) {
          const expected = own(me).sort((a, b) => a.id - b.id)
          expect(await visibleTo(me)).toEqual(expected)
        }
        // Nobody outside the crew sees anything, and the count matches the whole model.
        for (const outsider of members.slice(count)) expect(await visibleTo(outsider)).toEqual([])
        expect(await countAsSuperuser()).toBe(model.size)
      }),
      { numRuns: 15 }
    )
  }, 60_000)
})

/** The number of notes, as the superuser sees them (superusers bypass row-level security). */
const countAsSuperuser = async (): Promise<number> => {
  const rows = await query(stack.db.adminUrl, (sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM public.notes`)
  return rows[0]!.n
}
