/** A value as its display type shows it, always as text (never as HTML). */
import type { Column } from "./model.ts"

const money = new Intl.NumberFormat(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2, useGrouping: true })
const number = new Intl.NumberFormat(undefined, { maximumFractionDigits: 20 })

/** `YYYY-MM-DD` as the browser's locale writes that day (read as a local day, not UTC midnight). */
export const formatDate = (value: string): string => {
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

/** A colour the option names (`green`, `#1a6330`), or none: anything else is not passed to CSS. */
const safeColor = (color: string | null): string | null => (color !== null && /^(#[0-9a-f]{3,8}|[a-z]{3,20})$/i.test(color) ? color : null)

export const Value = (props: { readonly column: Column; readonly row: Readonly<Record<string, unknown>> }) => {
  const { column, row } = props
  const value = row[column.name]
  if (value === null || value === undefined) return null
  switch (column.displayType) {
    case "currency":
      return <>{formatNumber(money, value)}</>
    case "number":
      return <>{formatNumber(number, value)}</>
    case "boolean":
      return <>{value === true ? "Yes" : value === false ? "No" : String(value)}</>
    case "date":
      return <>{formatDate(String(value))}</>
    case "datetime":
      return <>{formatDateTime(String(value))}</>
    case "email":
      return <a href={`mailto:${String(value)}`}>{String(value)}</a>
    case "url": {
      const url = String(value)
      return /^https?:\/\//i.test(url) ? <a href={url} target="_blank" rel="noopener noreferrer">{url}</a> : <>{url}</>
    }
    case "json":
      return <pre class="json">{JSON.stringify(value, null, 2)}</pre>
    case "choice": {
      const option = column.options.find((candidate) => candidate.value === String(value))
      const color = safeColor(option?.color ?? null)
      return (
        <span class="chip">
          {color !== null ? <span class="dot" aria-hidden="true" style={{ background: color }} /> : null}
          {option?.label ?? String(value)}
        </span>
      )
    }
    case "reference": {
      const shown = row[`${column.name}_display`]
      return <>{shown === null || shown === undefined || shown === "" ? String(value) : String(shown)}</>
    }
    default:
      return <>{typeof value === "object" ? JSON.stringify(value) : String(value)}</>
  }
}
