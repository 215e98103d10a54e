/**
 * What the table screen draws from introspection (issue #25): labels and display types, the key
 * that orders pages, the columns searched, filtered and written, defaults, and the count of
 * `stats` ("≈" above 100,000 rows, where it is an estimate).
 */
import { describe, expect, it } from "vitest"
import { countWords, type Schema, tableModel } from "../../console/src/table/model.ts"

const column = (name: string, type: string, extra: Record<string, unknown> = {}) => ({
  name,
  type,
  nullable: true,
  has_default: false,
  default: null,
  is_generated: false,
  can_select: true,
  can_insert: true,
  can_update: true,
  ...extra
})

const managed = [
  column("id", "uuid", { nullable: false, has_default: true, default: "gen_random_uuid()" }),
  column("created_at", "timestamp with time zone", { nullable: false, has_default: true, default: "now()" }),
  column("updated_at", "timestamp with time zone", { nullable: false, has_default: true, default: "now()" }),
  column("created_by", "uuid", { has_default: true })
]
const orderColumns = [
  column("customer", "uuid"),
  column("status", "text", { nullable: false, has_default: true, default: "'open'::text" }),
  column("total", "numeric(14,2)"),
  column("note", "text", { nullable: false })
]

const schema: Schema = {
  relations: [
    { table_name: "orders", schema_name: "shop", kind: "table", cols: [...managed, ...orderColumns], can_insert: true, can_update: true, can_delete: false, is_managed: true },
    { table_name: "orders_v", schema_name: "shop", kind: "view", cols: [...managed, ...orderColumns, column("customer_display", "text")], can_insert: false, can_update: false, can_delete: false, is_managed: false }
  ],
  keys: [{ constraint_type: "PRIMARY KEY", source_schema: "shop", source_table: "orders", source_columns: ["id"] }],
  stats: [{ relname: "orders", number_rows: 1234 }],
  table_metadata: { orders: { display_columns: [] } },
  column_metadata: {
    orders: {
      customer: { display_type: "reference", column_type: "reference", reference_table: "customers" },
      status: { display_type: "choice", column_type: "choice", options: [{ value: "open", label: "Open", color: "blue" }, { value: "shipped" }] },
      total: { display_type: "currency", column_type: "currency", label: "Amount" },
      note: { display_type: "text", column_type: "text" }
    }
  }
}

describe("the table screen's model of a relation", () => {
  const model = tableModel(schema, { schema: "shop", name: "orders", label: "Orders", readFrom: "orders_v", writeTo: "orders" })!

  it("shows the table's columns by label and display type, a reference by its shown value, Plinth's columns but created_at left out", () => {
    expect(model.columns.map((c) => [c.name, c.label, c.displayType, c.sortColumn])).toEqual([
      ["customer", "Customer", "reference", "customer_display"],
      ["status", "Status", "choice", "status"],
      ["total", "Amount", "currency", "total"],
      ["note", "Note", "text", "note"],
      ["created_at", "Created", "datetime", "created_at"]
    ])
    expect(model.columns[1]!.options).toEqual([{ value: "open", label: "Open", color: "blue" }, { value: "shipped", label: "shipped", color: null }])
  })

  it("pages by the primary key, newest first, searches text columns and filters choices", () => {
    expect(model.key).toEqual(["id"])
    expect(model.defaultSort).toEqual({ column: "created_at", descending: true })
    expect(model.searchColumns).toEqual(["status", "note", "customer_display"])
    expect(model.filterColumns.map((c) => c.name)).toEqual(["status"])
  })

  it("names a row by its first text column that is not a choice, else by its first reference's shown value", () => {
    expect(model.displayColumns).toEqual(["note"])
    const noNote = {
      ...schema,
      relations: schema.relations.map((relation) => ({ ...relation, cols: relation.cols.filter((c) => c.name !== "note") }))
    }
    expect(tableModel(noNote, { schema: "shop", name: "orders", label: "Orders", readFrom: "orders_v", writeTo: "orders" })!.displayColumns).toEqual(["customer_display"])
  })

  it("writes the table's own columns: required where NOT NULL without a default, a literal default filled in", () => {
    expect(model.fields.map((f) => [f.name, f.required, f.defaultValue])).toEqual([
      ["customer", false, null],
      ["status", false, "open"],
      ["total", false, null],
      ["note", true, null]
    ])
    expect([model.canInsert, model.canUpdate, model.canDelete]).toEqual([true, true, false])
    expect(model.count).toBe(1234)
  })

  it("says a count above 100,000 rows is an estimate", () => {
    expect(countWords(1)).toBe("1 row")
    expect(countWords(100_000)).toBe("100,000 rows")
    expect(countWords(1_000_000)).toBe("≈ 1,000,000 rows")
  })
})
