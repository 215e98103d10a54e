/** A value as text by its column's display type: what the table screen shows and a page's charts name. */
import type { Column } from "./model.ts"

const money = new Intl.NumberFormat(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2, useGrouping: true })
const number = new Intl.NumberFormat(undefined, { maximumFractionDigits: 20 })

/** `YYYY-MM-DD` as the browser's locale writes that day (read as a local day, not UTC midnight). */
const formatDate = (value: string): string => {
  const parts = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value)
  return parts === null ? value : new Date(Number(parts[1]), Number(parts[2]) - 1, Number(parts[3])).toLocaleDateString()
}

const formatDateTime = (value: string): string => {
  const time = new Date(value)
  return Number.isNaN(time.getTime()) ? value : time.toLocaleString()
}

const formatNumber = (format: Intl.NumberFormat, value: unknown): string => {
  const parsed = Number(value)
  return Number.isFinite(parsed) ? format.format(parsed) : String(value)
}

/** A currency amount: two decimals, grouped (not a currency sign: the column does not name one). */
export const currencyText = (value: unknown): string => formatNumber(money, value)

/**
 * A value (not null) as text by its column's display type, as the table screen shows it; a
 * reference as its id (its shown value is another column of the row).
 */
export const valueText = (column: Column, value: unknown): string => {
  switch (column.displayType) {
    case "currency":
      return currencyText(value)
    case "number":
      return formatNumber(number, value)
    case "boolean":
      return value === true ? "Yes" : value === false ? "No" : String(value)
    case "date":
      return formatDate(String(value))
    case "datetime":
      return formatDateTime(String(value))
    case "choice":
      return column.options.find((option) => option.value === String(value))?.label ?? String(value)
    default:
      return typeof value === "object" ? JSON.stringify(value) : String(value)
  }
}
