/**
 * Managed tables made before issue #22: migrations 0017, 0021, 0022 and 0023 give them the indexes new tables
 * are made with ((created_by, created_at), reference columns, a trigram index on a text display column), and the sys SQL gives their choice columns the check that
 * names the column. Such a table is made here by taking those away from a current one.
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { migrateDatabase } from "../../src/layers/Database.ts"
import { databaseErrorFields } from "../../src/services/DatabaseError.ts"
import { createTestDatabase, query, type TestDatabase } from "../support/database.ts"

let db: TestDatabase
beforeAll(async () => {
  db = await createTestDatabase()
})
afterAll(() => db?.drop())

const run = <Row extends object = Record<string, unknown>>(text: string) =>
  query(db.adminUrl, (sql) => sql.unsafe<Row>(text))

const indexes = (table: string) =>
  run<{ name: string; definition: string }>(
    `SELECT indexname AS name, indexdef AS definition FROM pg_indexes WHERE schemaname = 'public' AND tablename = '${table}' AND indexname NOT LIKE '%_pkey' ORDER BY 1`)

/** Back to what create_table made before #22: no index but the primary key, choice checks by IN alone. */
const toPreviousLayout = async () => {
  for (const table of ["clients", "orders"]) {
    for (const { name } of await indexes(table)) await run(`DROP INDEX public.${name}`)
  }
  await run(`ALTER TABLE public.orders DROP CONSTRAINT tier_kind, ADD CONSTRAINT tier_kind CHECK (tier IN ('gold', 'silver'))`)
  await run(`DELETE FROM plinth.schema_migrations WHERE version IN (17, 21, 22, 23)`)
  // Its sys SQL was the previous text too (which an upgrade replaces).
  await run(`UPDATE plinth.sys_sql SET checksum = 'previous' WHERE name = '03_tables.sql'`)
}

describe("a database with managed tables of the previous layout", () => {
  it("gets created_by, reference and display column indexes from migrations 0017, 0021, 0022 and 0023, named as new ones are; again changes nothing", async () => {
    await run(`SELECT sys.create_table('clients', '[{"name": "name"}]')`)
    await run(`SELECT sys.create_table('orders', '[{"name": "client", "type": "reference", "references": "clients"},
      {"name": "tier", "type": "choice", "options": [{"value": "gold"}, {"value": "silver"}]}]')`)
    const current = { clients: await indexes("clients"), orders: await indexes("orders") }
    expect(current.orders.map((i) => i.definition.replace(/.* USING /, ""))).toEqual(expect.arrayContaining(["btree (client)", "btree (created_by, created_at)", "btree (created_at, id)", "gin (tier extensions.gin_trgm_ops)"]))

    await toPreviousLayout()
    expect(await indexes("orders")).toEqual([])
    await Effect.runPromise(migrateDatabase(db.adminUrl))
    expect({ clients: await indexes("clients"), orders: await indexes("orders") }).toEqual(current)
    const [names] = await run<{ a: string; b: string; c: string; d: string }>(
      "SELECT sys.column_index_name('orders', 'client') AS a, sys.column_index_name('clients', 'created_by') AS b, sys.column_index_name('clients', 'created_at') AS c, " +
        "sys.display_index_name('clients', 'name') AS d")
    expect(current.orders.map((i) => i.name)).toContain(names!.a)
    expect(current.clients.map((i) => i.name)).toEqual([names!.c, names!.b, names!.d])

    // Once more (the rows of 0017, 0021, 0022 and 0023 taken away again): the indexes there are kept, none added.
    await run(`DELETE FROM plinth.schema_migrations WHERE version IN (17, 21, 22, 23)`)
    await Effect.runPromise(migrateDatabase(db.adminUrl))
    expect({ clients: await indexes("clients"), orders: await indexes("orders") }).toEqual(current)
  })

  it("its choice columns' checks name the column and the values after the upgrade", async () => {
    await toPreviousLayout()
    await Effect.runPromise(migrateDatabase(db.adminUrl))
    const error = await query(db.adminUrl, (sql) => sql`INSERT INTO public.orders (tier) VALUES ('bronze')`.pipe(Effect.flip))
    expect(databaseErrorFields(error)).toMatchObject({
      code: "23514",
      message: "a value of choice column tier is not one of its options (check constraint tier_kind)",
      hint: "tier takes 'gold', 'silver'"
    })
  })
})
