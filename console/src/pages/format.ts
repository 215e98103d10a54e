/**
 * How a page shows a query's values: a result column is described by the app's column metadata
 * when a table of the app has a column of that name (all such columns agreeing on its display
 * type), else it is plain text; numbers of charts and values in the browser's locale.
 */
import type { ValueFormat } from "../../../src/services/PageFormat.ts"
import { labelOf } from "../navigation.ts"
import type { Column, Schema } from "../table/model.ts"

type Metadata = Schema["column_metadata"][string][string]

/** `YYYY-MM-DD` as the browser's locale writes that day (as the table screen shows dates). */
const formatDate = (value: string): string => {
  const parts = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value)
  return parts === null ? value : new Date(Number(parts[1]), Number(parts[2]) - 1, Number(parts[3])).toLocaleDateString()
}

const plainColumn = (name: string): Column => ({ name, label: labelOf(name), displayType: "text", type: "text", options: [], referenceTable: null, sortColumn: null })

const columnFrom = (name: string, meta: Metadata): Column => ({
  ...plainColumn(name),
  label: meta.label ?? labelOf(name),
  displayType: meta.display_type,
  options: (meta.options ?? []).map((option) => ({
    value: String(option.value),
    label: option.label === null || option.label === undefined ? String(option.value) : String(option.label),
    color: option.color === null || option.color === undefined ? null : String(option.color)
  }))
})

/** The column a result column `name` stands for, by the app's metadata (see the module's comment). */
export const resultColumn = (name: string, schema: Schema | null): Column => {
  if (schema === null) return plainColumn(name)
  const matches = Object.values(schema.column_metadata).flatMap((columns) => {
    const meta = columns[name]
    return meta === undefined ? [] : [meta]
  })
  const first = matches[0]
  if (first === undefined || matches.some((meta) => meta.display_type !== first.display_type)) return plainColumn(name)
  // A reference's value is an id: its shown value is in `<name>_display`, which a query selects by itself.
  return first.display_type === "reference" ? { ...columnFrom(name, first), displayType: "text" } : columnFrom(name, first)
}

/** A value as a number, or null when it is none (numeric and bigint come as strings). */
export const numberOf = (value: unknown): number | null => {
  if (value === null || value === undefined || value === "" || typeof value === "boolean") return null
  const parsed = typeof value === "number" ? value : Number(value)
  return Number.isFinite(parsed) ? parsed : null
}

const grouped = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 })
const money = new Intl.NumberFormat(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 })

/** A value as text by its column's display type (what a chart's labels and names say). */
export const textOf = (column: Column, value: unknown): string => {
  if (value === null || value === undefined) return "none"
  switch (column.displayType) {
    case "currency": {
      const parsed = numberOf(value)
      return parsed === null ? String(value) : money.format(parsed)
    }
    case "number": {
      const parsed = numberOf(value)
      return parsed === null ? String(value) : grouped.format(parsed)
    }
    case "boolean":
      return value === true ? "Yes" : value === false ? "No" : String(value)
    case "date":
      return formatDate(String(value))
    case "datetime": {
      const time = new Date(String(value))
      return Number.isNaN(time.getTime()) ? String(value) : time.toLocaleString()
    }
    case "choice":
      return column.options.find((option) => option.value === String(value))?.label ?? String(value)
    default:
      return typeof value === "object" ? JSON.stringify(value) : String(value)
  }
}

/** A number of a chart's axis or label: by the column's display type, else grouped. */
export const numberText = (column: Column, value: number): string =>
  column.displayType === "currency" ? money.format(value) : grouped.format(value)

/**
 * A `value` component's number: `number` grouped, `currency` in `currency` (an ISO 4217 code), `percent` of a fraction (0.25 is 25 %).
 */
export const formatValue = (value: unknown, format: ValueFormat, currency: string): string => {
  const parsed = numberOf(value)
  if (parsed === null) return value === null || value === undefined ? "—" : String(value)
  switch (format) {
    case "currency":
      try {
        return new Intl.NumberFormat(undefined, { style: "currency", currency }).format(parsed)
      } catch {
        return money.format(parsed)
      }
    case "percent":
      return new Intl.NumberFormat(undefined, { style: "percent", maximumFractionDigits: 1 }).format(parsed)
    default:
      return grouped.format(parsed)
  }
}
