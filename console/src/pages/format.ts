/**
 * How a page shows a query's values: a result column is described by the app's column metadata
 * when a table of the app has a column of that name (all such columns agreeing on its display
 * type), else it is plain text; numbers of charts and values in the browser's locale.
 */
import type { ValueFormat } from "../../../src/services/PageFormat.ts"
import { labelOf } from "../navigation.ts"
import type { Column, Schema } from "../table/model.ts"
import { currencyText, valueText } from "../table/valueText.ts"

type Metadata = Schema["column_metadata"][string][string]

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

/** A value as text by its column's display type, as the table screen shows it (what a chart's labels and names say). */
export const textOf = (column: Column, value: unknown): string => value === null || value === undefined ? "none" : valueText(column, value)

/** A number of a chart's axis or label: by the column's display type, else grouped. */
export const numberText = (column: Column, value: number): string =>
  column.displayType === "currency" ? currencyText(value) : grouped.format(value)

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
        return currencyText(parsed)
      }
    case "percent":
      return new Intl.NumberFormat(undefined, { style: "percent", maximumFractionDigits: 1 }).format(parsed)
    default:
      return grouped.format(parsed)
  }
}
