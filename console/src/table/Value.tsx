/** A value as its display type shows it, always as text (never as HTML). */
import type { Column } from "./model.ts"
import { valueText } from "./valueText.ts"

/** A colour the option names (`green`, `#1a6330`), or none: anything else is not passed to CSS. */
const safeColor = (color: string | null): string | null => (color !== null && /^(#[0-9a-f]{3,8}|[a-z]{3,20})$/i.test(color) ? color : null)

export const Value = (props: { readonly column: Column; readonly row: Readonly<Record<string, unknown>> }) => {
  const { column, row } = props
  const value = row[column.name]
  if (value === null || value === undefined) return null
  switch (column.displayType) {
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
      return <>{valueText(column, value)}</>
  }
}
