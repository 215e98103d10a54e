/**
 * What the table screen needs of a relation, drawn from introspection (docs/api.md, "POST /"): its
 * columns with labels and display types, the key that orders pages, what may be searched, filtered,
 * sorted and written, and the row count of `stats`.
 */
import { labelOf, type NavEntry } from "../navigation.ts"

export interface ChoiceOption {
  readonly value: string
  readonly label: string
  readonly color: string | null
}

export interface Column {
  readonly name: string
  readonly label: string
  /** text, number, currency, boolean, date, datetime, email, url, json, choice, reference. */
  readonly displayType: string
  /** The SQL type (format_type). */
  readonly type: string
  readonly options: ReadonlyArray<ChoiceOption>
  /** The referenced table of a reference column. */
  readonly referenceTable: string | null
  /** What ordering by this column sorts on (a reference's display value); null when it cannot be sorted. */
  readonly sortColumn: string | null
}

export interface Field extends Column {
  readonly required: boolean
  readonly hasDefault: boolean
  /** The default as a value for the form, when it is a plain literal. */
  readonly defaultValue: string | null
  readonly nullable: boolean
  readonly canInsert: boolean
  readonly canUpdate: boolean
}

export interface TableModel {
  readonly schema: string
  readonly label: string
  /** Rows are read from here (the read view, or the relation itself). */
  readonly readFrom: string
  /** Rows are written here; null for a view without a table. */
  readonly writeTo: string | null
  /** Shown, in this order. */
  readonly columns: ReadonlyArray<Column>
  /** Read (shown, plus what paging, forms and names need). */
  readonly selected: ReadonlyArray<string>
  readonly key: ReadonlyArray<string>
  /** Whether the key is one uuid column (a managed table's id): bulk actions bind the chosen keys as a uuid array. */
  readonly keyIsUuid: boolean
  /** Columns of the table that are never null: sorted by one, a page is read straight from an index. */
  readonly notNull: ReadonlyArray<string>
  readonly defaultSort: { readonly column: string; readonly descending: boolean } | null
  readonly searchColumns: ReadonlyArray<string>
  readonly filterColumns: ReadonlyArray<Column>
  /** Names a row (its table's display columns). */
  readonly displayColumns: ReadonlyArray<string>
  readonly fields: ReadonlyArray<Field>
  readonly canInsert: boolean
  readonly canUpdate: boolean
  readonly canDelete: boolean
  /** Rows as `stats` counts them (exact below 100,000, estimated above), for the unfiltered table. */
  readonly count: number | null
}

interface IntrospectedColumn {
  readonly name: string
  readonly type: string
  readonly nullable: boolean
  readonly has_default: boolean
  readonly default: string | null
  readonly is_generated: boolean
  readonly can_select: boolean
  readonly can_insert: boolean
  readonly can_update: boolean
}

interface IntrospectedRelation {
  readonly table_name: string
  readonly schema_name: string
  readonly kind: string
  readonly cols: ReadonlyArray<IntrospectedColumn>
  readonly can_insert: boolean
  readonly can_update: boolean
  readonly can_delete: boolean
  readonly is_managed: boolean
}

interface Metadata {
  readonly display_type: string
  readonly column_type: string
  readonly label?: string
  readonly options?: ReadonlyArray<{ readonly value: unknown; readonly label?: unknown; readonly color?: unknown }>
  readonly reference_table?: string
}

/** What of introspection the model reads. */
export interface Schema {
  readonly relations: ReadonlyArray<IntrospectedRelation>
  readonly keys: ReadonlyArray<{ readonly constraint_type: string; readonly source_schema: string; readonly source_table: string; readonly source_columns: ReadonlyArray<string> }>
  readonly stats: ReadonlyArray<{ readonly relname: string; readonly number_rows: number }>
  readonly table_metadata: Readonly<Record<string, { readonly display_columns: ReadonlyArray<string> }>>
  readonly column_metadata: Readonly<Record<string, Readonly<Record<string, Metadata>>>>
}

/** The columns every managed table has, which Plinth fills. */
const MANAGED = new Set(["id", "created_at", "updated_at", "created_by"])

/** A display type from the SQL type, for columns without metadata. */
const displayTypeOf = (type: string): string => {
  if (type === "boolean") return "boolean"
  if (/^(integer|bigint|smallint|numeric|real|double precision)/.test(type)) return "number"
  if (type === "date") return "date"
  if (type.startsWith("timestamp")) return "datetime"
  if (type === "json" || type === "jsonb") return "json"
  return "text"
}

const isText = (type: string) => type === "text" || type.startsWith("character")

const text = (value: unknown): string | null => (value === null || value === undefined ? null : String(value))

/** `'open'::text` → `open`, `42` → `42`, `false` → `false`; null for an expression (`now()`). */
const literalOf = (expression: string | null): string | null => {
  if (expression === null) return null
  const quoted = /^'((?:[^']|'')*)'(::[\w\s(),]+)?$/.exec(expression)
  if (quoted !== null) return quoted[1]!.replaceAll("''", "'")
  if (/^-?\d+(\.\d+)?$/.test(expression) || expression === "true" || expression === "false") return expression
  return null
}

export const tableModel = (schema: Schema, entry: NavEntry): TableModel | null => {
  const find = (name: string) => schema.relations.find((relation) => relation.schema_name === entry.schema && relation.table_name === name)
  const read = find(entry.readFrom)
  if (read === undefined) return null
  const write = entry.writeTo === null ? null : find(entry.writeTo) ?? null
  const table = entry.writeTo ?? entry.readFrom
  const metadata = schema.column_metadata[table] ?? {}
  const managed = write?.is_managed ?? read.is_managed
  const readable = read.cols.filter((column) => column.can_select)
  const readableNames = new Set(readable.map((column) => column.name))
  const references = new Set(Object.entries(metadata).filter(([, meta]) => meta.column_type === "reference").map(([name]) => name))

  const columnOf = (column: IntrospectedColumn): Column => {
    const meta = metadata[column.name]
    const displayType = meta?.display_type ?? displayTypeOf(column.type)
    const referenceTable = meta?.reference_table ?? null
    const display = `${column.name}_display`
    return {
      name: column.name,
      label: meta?.label ?? (column.name === "created_at" ? "Created" : labelOf(column.name)),
      displayType,
      type: column.type,
      options: (meta?.options ?? []).map((option) => ({
        value: String(option.value),
        label: text(option.label) ?? String(option.value),
        color: text(option.color)
      })),
      referenceTable,
      sortColumn: displayType === "json" ? null : referenceTable !== null && readableNames.has(display) ? display : column.name
    }
  }

  const shown = readable.filter((column) =>
    !(managed && MANAGED.has(column.name)) && !(column.name.endsWith("_display") && references.has(column.name.slice(0, -"_display".length)))
  )
  const columns = [...shown, ...(managed ? readable.filter((column) => column.name === "created_at") : [])].map(columnOf)

  const primary = schema.keys.find((key) => key.constraint_type === "PRIMARY KEY" && key.source_schema === entry.schema && key.source_table === table)
  const key = primary !== undefined && primary.source_columns.every((name) => readableNames.has(name))
    ? primary.source_columns
    : readableNames.has("id") ? ["id"] : []

  const configured = schema.table_metadata[table]?.display_columns ?? []
  // Without configured display columns: the first text column that is not a choice (a status names no
  // row), else the first reference's shown value, else the key.
  const firstText = columns.find((column) => isText(column.type) && column.referenceTable === null && column.displayType !== "choice")
  const firstReference = columns.find((column) => column.sortColumn !== null && column.sortColumn !== column.name)
  const displayColumns = configured.length > 0
    ? configured.filter((name) => readableNames.has(name))
    : firstText !== undefined ? [firstText.name] : firstReference?.sortColumn != null ? [firstReference.sortColumn] : key

  const fields: ReadonlyArray<Field> = (write?.cols ?? []).filter((column) => !column.is_generated && !(managed && MANAGED.has(column.name)) && (column.can_insert || column.can_update))
    .map((column) => ({
      ...columnOf(column),
      required: !column.nullable && !column.has_default,
      hasDefault: column.has_default,
      defaultValue: literalOf(column.default),
      nullable: column.nullable,
      canInsert: column.can_insert,
      canUpdate: column.can_update
    }))

  return {
    schema: entry.schema,
    label: entry.label,
    readFrom: entry.readFrom,
    writeTo: entry.writeTo,
    columns,
    selected: readable.map((column) => column.name),
    key,
    keyIsUuid: key.length === 1 && readable.find((column) => column.name === key[0])?.type === "uuid",
    notNull: (write?.cols ?? []).filter((column) => !column.nullable).map((column) => column.name),
    defaultSort: managed && readableNames.has("created_at") ? { column: "created_at", descending: true } : null,
    searchColumns: readable.filter((column) => isText(column.type) && !references.has(column.name)).map((column) => column.name),
    filterColumns: columns.filter((column) => column.displayType === "choice" || column.displayType === "boolean"),
    displayColumns,
    fields,
    canInsert: write !== null && write.can_insert && key.length > 0,
    canUpdate: write !== null && write.can_update && key.length > 0,
    canDelete: write !== null && write.can_delete && key.length > 0,
    count: schema.stats.find((stat) => stat.relname === table)?.number_rows ?? null
  }
}

/** Above this, `stats` is the planner's estimate. */
export const ESTIMATED_ABOVE = 100_000

/** The count of `stats` in words, marked "≈" above 100,000 rows (an estimate). */
export const countWords = (count: number): string =>
  `${count > ESTIMATED_ABOVE ? "≈ " : ""}${count.toLocaleString()} ${count === 1 ? "row" : "rows"}`

/** A row's name, for its buttons: its display columns' values. */
export const rowName = (model: TableModel, row: Readonly<Record<string, unknown>>): string =>
  model.displayColumns.map((name) => text(row[name]) ?? "").filter((part) => part !== "").join(" ") || String(row[model.key[0] ?? ""] ?? "")

/** The referenced relation to pick from (its read view when it has one) and its display columns. */
export const pickerSource = (schema: Schema, model: TableModel, table: string): { readonly relation: string; readonly displayColumns: ReadonlyArray<string> } => {
  const view = schema.relations.some((relation) => relation.schema_name === model.schema && relation.table_name === `${table}_v`)
  const configured = schema.table_metadata[table]?.display_columns ?? []
  const metadata = schema.column_metadata[table] ?? {}
  // The read view's rule: the first text, email or choice column (in the table's order).
  const firstText = schema.relations.find((relation) => relation.schema_name === model.schema && relation.table_name === table)?.cols
    .find((column) => ["text", "email", "choice"].includes(metadata[column.name]?.column_type ?? ""))?.name
  return { relation: view ? `${table}_v` : table, displayColumns: configured.length > 0 ? configured : firstText !== undefined ? [firstText] : ["id"] }
}
