/**
 * The table screen's statements (issue #25): identifiers quoted by one function, every value a bind
 * parameter, keyset pages (after the last row's sort value and key, never OFFSET).
 */
import { describe, expect, it } from "vitest"
import {
  arrayLiteral,
  bulkDeleteStatement,
  bulkUpdateStatement,
  containsPattern,
  insertStatement,
  pageStatement,
  PICKER_RECENT,
  PICKER_SEARCH_ALL_FROM,
  pickerStatement,
  quote,
  updateStatement
} from "../../console/src/table/statements.ts"

const base = {
  schema: "shop",
  relation: "orders_v",
  columns: ["id", "note", "total"],
  key: ["id"],
  sort: null,
  search: "",
  searchColumns: ["note"],
  filters: [],
  after: null,
  limit: 51
}

describe("the table screen's statements", () => {
  it("quote identifiers, doubling their quotes", () => {
    expect(quote('we"ird')).toBe('"we""ird"')
  })

  it("read the first page in key order", () => {
    expect(pageStatement(base)).toEqual({ sql: 'SELECT "id", "note", "total" FROM "shop"."orders_v" ORDER BY "id" ASC LIMIT $1', params: [51] })
  })

  it("continue after the last row's sort value and key, nulls last", () => {
    const next = pageStatement({ ...base, sort: { column: "total", descending: true }, after: { sortValue: "12.50", key: ["k"] } })
    expect(next.sql).toBe(
      'SELECT "id", "note", "total" FROM "shop"."orders_v" WHERE ("total" < $1 OR ("total" = $1 AND ("id") < ($2)) OR "total" IS NULL) ' +
        'ORDER BY "total" DESC NULLS LAST, "id" DESC LIMIT $3'
    )
    expect(next.params).toEqual(["12.50", "k", 51])
    const afterNull = pageStatement({ ...base, sort: { column: "total", descending: false }, after: { sortValue: null, key: ["k"] } })
    expect(afterNull.sql).toContain('WHERE ("total" IS NULL AND ("id") > ($1))')
  })

  it("a column never null: no NULLS LAST, and the cursor one row comparison (an index on the column and key serves it)", () => {
    const next = pageStatement({ ...base, sort: { column: "created_at", descending: true }, notNull: ["created_at"], after: { sortValue: "2026-01-01T00:00:00Z", key: ["k"] } })
    expect(next.sql).toBe(
      'SELECT "id", "note", "total" FROM "shop"."orders_v" WHERE ("created_at", "id") < ($1, $2) ORDER BY "created_at" DESC, "id" DESC LIMIT $3'
    )
    expect(next.params).toEqual(["2026-01-01T00:00:00Z", "k", 51])
    expect(pageStatement({ ...base, sort: { column: "created_at", descending: false }, notNull: ["created_at"] }).sql)
      .toBe('SELECT "id", "note", "total" FROM "shop"."orders_v" ORDER BY "created_at" ASC, "id" ASC LIMIT $1')
  })

  it("search with a bound pattern (its wildcards literal) and filter with bound values", () => {
    const found = pageStatement({ ...base, search: "50%_off", filters: [{ column: "paid", value: true }] })
    expect(found.sql).toBe('SELECT "id", "note", "total" FROM "shop"."orders_v" WHERE ("note"::text ILIKE $1) AND "paid" = $2 ORDER BY "id" ASC LIMIT $3')
    expect(found.params).toEqual(["%50\\%\\_off%", true, 51])
    expect(containsPattern("a\\b")).toBe("%a\\\\b%")
  })

  it("write only bound values", () => {
    expect(insertStatement("shop", "orders", [["note", "x'); DROP TABLE orders; --"]])).toEqual({
      sql: 'INSERT INTO "shop"."orders" ("note") VALUES ($1)',
      params: ["x'); DROP TABLE orders; --"]
    })
    expect(updateStatement("shop", "orders", [["total", "3"], ["note", null]], ["id"], ["k"])).toEqual({
      sql: 'UPDATE "shop"."orders" SET "total" = $1, "note" = $2 WHERE ("id") = ($3)',
      params: ["3", null, "k"]
    })
  })

  describe("the reference picker: at most 20 rows, each search reading a bounded number of them", () => {
    const label = `concat_ws(' ', "name"::text, "city"::text)`
    const recent = `(SELECT "id" AS value, ${label} AS label FROM "shop"."customers_v" ORDER BY "created_at" DESC, "id" DESC LIMIT 5000) AS recent`
    const order = "ORDER BY CASE WHEN label ILIKE $2 THEN 0 WHEN label ILIKE $3 THEN 1 ELSE 2 END, label, value LIMIT $4"

    it("no search: the newest 5,000 rows (an index order), the first 20 of them by label", () => {
      expect(PICKER_RECENT).toBe(5000)
      expect(pickerStatement("shop", "customers_v", ["name", "city"], "")).toEqual({
        sql: `SELECT value, label FROM ${recent} ORDER BY label, value LIMIT $1`,
        params: [20]
      })
    })

    it("one or two characters: looked for in the newest 5,000 rows only, exact and starting matches first", () => {
      expect(PICKER_SEARCH_ALL_FROM).toBe(3)
      for (const search of ["a", "ac", "é%"]) {
        const escaped = search.replace("%", "\\%")
        expect(pickerStatement("shop", "customers_v", ["name", "city"], search)).toEqual({
          sql: `SELECT value, label FROM ${recent} WHERE label ILIKE $1 ${order}`,
          params: [`%${escaped}%`, escaped, `${escaped}%`, 20]
        })
      }
    })

    it("three characters or more: the newest 5,000 rows first, then the older ones through the display columns (a trigram index), in one statement", () => {
      const matches = '("name"::text ILIKE $1 OR "city"::text ILIKE $1)'
      const older = '("created_at", "id") < (SELECT "created_at", "id" FROM "shop"."customers_v" ORDER BY "created_at" DESC, "id" DESC OFFSET 4999 LIMIT 1)'
      expect(pickerStatement("shop", "customers_v", ["name", "city"], "ac_")).toEqual({
        sql: `SELECT value, label FROM ((SELECT value, label FROM ${recent} WHERE label ILIKE $1 ${order}) UNION ALL ` +
          `(SELECT value, label FROM (SELECT "id" AS value, ${label} AS label FROM "shop"."customers_v" WHERE ${matches} AND ${matches} AND ${older}) AS older ${order})) ` +
          "AS options LIMIT $5",
        params: ["%ac\\_%", "ac\\_", "ac\\_%", 20, 20]
      })
    })

    it("a relation without created_at is read in its key's order", () => {
      expect(pickerStatement("shop", "legacy", ["name"], "", 20, ["id"]).sql)
        .toBe(`SELECT value, label FROM (SELECT "id" AS value, concat_ws(' ', "name"::text) AS label FROM "shop"."legacy" ORDER BY "id" DESC LIMIT 5000) AS recent ORDER BY label, value LIMIT $1`)
      expect(pickerStatement("shop", "legacy", ["name"], "abc", 20, ["id"]).sql).toContain('("id") < (SELECT "id" FROM "shop"."legacy" ORDER BY "id" DESC OFFSET 4999 LIMIT 1)')
    })
  })

  describe("bulk actions: one statement each, every value bound", () => {
    const target = { schema: "shop", table: "orders", key: "id", keyIsUuid: true }
    const keys = ["0b7c4f3e-0000-4000-8000-000000000001", "0b7c4f3e-0000-4000-8000-000000000002"]

    it("set one field in the ticked rows, their keys one uuid array", () => {
      expect(bulkUpdateStatement(target, "status", "shipped", { kind: "keys", keys })).toEqual({
        sql: 'UPDATE "shop"."orders" SET "status" = $1 WHERE "id" = ANY($2::uuid[])',
        params: ["shipped", `{"${keys[0]}","${keys[1]}"}`]
      })
      expect(bulkDeleteStatement(target, { kind: "keys", keys })).toEqual({
        sql: 'DELETE FROM "shop"."orders" WHERE "id" = ANY($1::uuid[])',
        params: [`{"${keys[0]}","${keys[1]}"}`]
      })
    })

    it("a key that is not a uuid is compared as text; the array literal quotes each element", () => {
      expect(bulkDeleteStatement({ ...target, table: 'we"ird', key: "code", keyIsUuid: false }, { kind: "keys", keys: ['a"b', "c\\d", "e,f}"] })).toEqual({
        sql: 'DELETE FROM "shop"."we""ird" WHERE "code"::text = ANY($1::text[])',
        params: ['{"a\\"b","c\\\\d","e,f}"}']
      })
      expect(arrayLiteral([])).toBe("{}")
    })

    it("all rows matching: the screen's own bound search and filters, on the relation it reads", () => {
      const query = { ...base, search: "50%", filters: [{ column: "paid", value: false }] }
      expect(bulkUpdateStatement(target, "note", "x'); DROP TABLE orders; --", { kind: "matching", query })).toEqual({
        sql: 'UPDATE "shop"."orders" SET "note" = $1 WHERE "id" IN (SELECT "id" FROM "shop"."orders_v" WHERE ("note"::text ILIKE $2) AND "paid" = $3)',
        params: ["x'); DROP TABLE orders; --", "%50\\%%", false]
      })
      expect(bulkDeleteStatement(target, { kind: "matching", query: { ...base, relation: "orders" } })).toEqual({
        sql: 'DELETE FROM "shop"."orders" WHERE true',
        params: []
      })
      expect(bulkDeleteStatement(target, { kind: "matching", query: { ...base, relation: "orders", filters: [{ column: "status", value: "open" }] } })).toEqual({
        sql: 'DELETE FROM "shop"."orders" WHERE "status" = $1',
        params: ["open"]
      })
    })

    it("crafted names (field, key, table, filter and search columns) stay one quoted identifier each; values stay bound", () => {
      const evil = 'x" = 1; DROP TABLE orders; --'
      const crafted = { schema: 'sh"op', table: evil, key: `${evil}id`, keyIsUuid: false }
      expect(bulkUpdateStatement(crafted, evil, "$1", { kind: "keys", keys: ["} , {", "NULL"] })).toEqual({
        sql: 'UPDATE "sh""op"."x"" = 1; DROP TABLE orders; --" SET "x"" = 1; DROP TABLE orders; --" = $1 ' +
          'WHERE "x"" = 1; DROP TABLE orders; --id"::text = ANY($2::text[])',
        params: ["$1", '{"} , {","NULL"}']
      })
      const query = { ...base, relation: `${evil}_v`, search: "'; --", searchColumns: [evil], filters: [{ column: evil, value: "' OR true --" }] }
      expect(bulkDeleteStatement(crafted, { kind: "matching", query })).toEqual({
        sql: 'DELETE FROM "sh""op"."x"" = 1; DROP TABLE orders; --" WHERE "x"" = 1; DROP TABLE orders; --id" IN ' +
          '(SELECT "x"" = 1; DROP TABLE orders; --id" FROM "shop"."x"" = 1; DROP TABLE orders; --_v" ' +
          'WHERE ("x"" = 1; DROP TABLE orders; --"::text ILIKE $1) AND "x"" = 1; DROP TABLE orders; --" = $2)',
        params: ["%'; --%", "' OR true --"]
      })
    })
  })
})
