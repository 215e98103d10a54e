/**
 * Migration 0018 on a database with chats stored before it (issue #22): the page tools' stored
 * results (sys.page_json as it was, jsonb's `+00:00` rendering) get their timestamps in the form
 * every answer now has (ISO 8601 in UTC with `Z`); nothing else of any message changes, and
 * messages get an `error` column, empty for what was stored before.
 */
import { Effect } from "effect"
import { afterAll, expect, it } from "vitest"
import { migrateDatabase, withDatabase } from "../../src/layers/Database.ts"
import { migrate, readMigrations } from "../../src/services/Migrator.ts"
import { createTestDatabase, query, type TestDatabase } from "../support/database.ts"

let db: TestDatabase | undefined
afterAll(() => db?.drop())

const page = (tool: string, times: Record<string, string>) => ({
  type: "tool_call",
  tool_calls: [{ id: `toolu_${tool}`, name: tool, args: { slug: "p" } }],
  tool_result: { result: { schema_name: "public", slug: "p", title: "P", source: "", updated_by: null, ...times } }
})

it("rewrites the page tools' stored timestamps to ISO 8601 UTC with Z, and nothing else", async () => {
  db = await createTestDatabase({ migrated: false })
  const adminUrl = db.adminUrl
  await Effect.runPromise(Effect.gen(function*() {
    const before = (yield* readMigrations()).filter((migration) => migration.version < 18)
    yield* withDatabase(adminUrl, migrate(before))
  }))
  const stored = [
    page("propose_create_page", { created_at: "2026-11-25T02:53:21.471099+00:00", updated_at: "2026-11-25T08:23:21.5+05:30" }),
    page("propose_update_page", { created_at: "2026-11-25T02:53:21+00:00", updated_at: "2026-11-24T23:53:21.1-03:00" }),
    page("propose_create_page", { created_at: "2026-11-25T02:53:21Z", updated_at: "not a time" }),
    {
      type: "tool_call",
      tool_calls: [{ id: "toolu_select", name: "select_data", args: { sql: "SELECT 1" } }],
      tool_result: { result: { rows: [{ created_at: "2026-11-25T02:53:21+00:00" }], rowCount: 1, truncated: false } }
    },
    { type: "tool_call", tool_calls: [{ id: "toolu_failed", name: "propose_create_page", args: {} }], tool_result: { error: "no" } },
    { type: "text", text: "created_at 2026-11-25T02:53:21+00:00" }
  ]
  const ids = await query(adminUrl, (sql) =>
    Effect.gen(function*() {
      const [user] = yield* sql<{ id: string }>`INSERT INTO sys.users (email, role) VALUES ('old@plinth.test', 'owner') RETURNING id::text`
      const [conversation] = yield* sql<{ id: string }>`INSERT INTO sys.conversations (user_id, title) VALUES (${user!.id}, 'old') RETURNING id::text`
      const ids: Array<string> = []
      for (const content of stored) {
        const [row] = yield* sql<{ id: string }>`INSERT INTO sys.messages (conversation_id, role, content, status)
          VALUES (${conversation!.id}, 'assistant', ${JSON.stringify(content)}::jsonb, 'complete') RETURNING id::text`
        ids.push(row!.id)
      }
      return ids
    }))

  await Effect.runPromise(migrateDatabase(adminUrl))

  const after = await query(adminUrl, (sql) =>
    sql<{ id: string; content: Record<string, unknown>; error: string | null }>`SELECT id::text, content, error FROM sys.messages ORDER BY position`)
  expect(after.map((row) => row.id)).toEqual(ids)
  expect(after.map((row) => row.error)).toEqual(stored.map(() => null))
  expect(after.map((row) => row.content)).toEqual([
    page("propose_create_page", { created_at: "2026-11-25T02:53:21.471099Z", updated_at: "2026-11-25T02:53:21.5Z" }),
    page("propose_update_page", { created_at: "2026-11-25T02:53:21Z", updated_at: "2026-11-25T02:53:21.1Z" }),
    ...stored.slice(2)
  ])
})
