/**
 * The console's navigation from introspection (issue #25), by the `write_target` rules of
 * docs/api.md: a read view stands for its table under the table's label, a table with a read view
 * is not listed, other views are (read only), Plinth's own relations are left out, and the app's
 * entries come before public's.
 */
import { describe, expect, it } from "vitest"
import { labelOf, navigationOf, type Relation } from "../../console/src/navigation.ts"

const relation = (schema: string, name: string, kind: string, writeTarget: string | null, extra: Partial<Relation> = {}): Relation => ({
  table_name: name,
  schema_name: schema,
  kind,
  can_select: true,
  write_target: writeTarget,
  is_system: false,
  ...extra
})

describe("the navigation of an app", () => {
  it("lists a read view under its table's label, hides the table it stands for, keeps other views and tables, leaves out Plinth's own", () => {
    const navigation = navigationOf([
      relation("crm", "orders", "table", null),
      relation("crm", "orders_v", "view", "orders"),
      relation("crm", "order_lines_v", "view", "order_lines"),
      relation("crm", "order_lines", "table", null),
      relation("crm", "big_spenders", "view", null),
      relation("crm", "notes", "table", "notes"),
      relation("public", "conversations", "view", null, { is_system: true }),
      relation("public", "messages", "view", null, { is_system: true }),
      relation("public", "countries_v", "view", "countries"),
      relation("public", "countries", "table", null),
      relation("crm", "secrets", "table", "secrets", { can_select: false })
    ], "crm")
    expect(navigation.map((group) => ({ schema: group.schema, entries: group.entries.map((entry) => [entry.label, entry.name, entry.readFrom, entry.writeTo]) }))).toEqual([
      {
        schema: "crm",
        entries: [
          ["Big spenders", "big_spenders", "big_spenders", null],
          ["Notes", "notes", "notes", "notes"],
          ["Order lines", "order_lines", "order_lines_v", "order_lines"],
          ["Orders", "orders", "orders_v", "orders"]
        ]
      },
      { schema: "public", entries: [["Countries", "countries", "countries_v", "countries"]] }
    ])
  })

  it("has only public's group in the public schema, and none for a schema without entries", () => {
    expect(navigationOf([relation("public", "conversations", "view", null, { is_system: true })], "public")).toEqual([])
    expect(navigationOf([relation("public", "t", "table", "t")], "public").map((group) => group.schema)).toEqual(["public"])
  })

  it("labels names as words", () => {
    expect(labelOf("order_lines")).toBe("Order lines")
    expect(labelOf("customers")).toBe("Customers")
  })
})
