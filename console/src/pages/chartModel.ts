/**
 * What a chart draws, from a query's rows: the x values in the rows' order, and one series per y
 * column, or, with a series column, one per value of that column (of the first y column); rows with
 * the same x (and series) add up. Pure,
 * so that a unit test can check what each bar, point and slice is called.
 */
import type { Column } from "../table/model.ts"
import { numberOf, numberText, textOf } from "./format.ts"

export type ChartType = "bar" | "line" | "area" | "pie"

export interface ChartOptions {
  readonly type: ChartType
  readonly x: string
  readonly y: ReadonlyArray<string>
  readonly series: string | null
}

export interface ChartSeries {
  readonly label: string
  /** One per x value; null where the rows have none. */
  readonly values: ReadonlyArray<number | null>
}

export interface ChartData {
  readonly type: ChartType
  readonly xLabel: string
  readonly yLabel: string
  readonly xs: ReadonlyArray<string>
  readonly series: ReadonlyArray<ChartSeries>
  /** A value as the y column shows it. */
  readonly formatY: (value: number) => string
}

/** A chart of `rows`, or why it cannot be drawn (a column the rows do not have). */
export const chartData = (
  rows: ReadonlyArray<Readonly<Record<string, unknown>>>,
  options: ChartOptions,
  columnOf: (name: string) => Column
): ChartData | { readonly error: string } => {
  const first = rows[0]
  if (first !== undefined) {
    const missing = [options.x, ...options.y, ...(options.series === null ? [] : [options.series])].filter((name) => !(name in first))
    if (missing.length > 0) {
      return { error: `The query's rows have no column ${missing.join(", ")} (they have ${Object.keys(first).join(", ") || "none"}).` }
    }
  }
  const xColumn = columnOf(options.x)
  const yColumns = options.y.map(columnOf)
  const yColumn = yColumns[0] ?? xColumn
  const xKeys: Array<string> = []
  const xIndex = new Map<string, number>()
  const xs: Array<string> = []
  for (const row of rows) {
    const key = JSON.stringify(row[options.x] ?? null)
    if (!xIndex.has(key)) {
      xIndex.set(key, xKeys.length)
      xKeys.push(key)
      xs.push(textOf(xColumn, row[options.x]))
    }
  }
  const empty = () => xKeys.map((): number | null => null)
  // Rows with the same x (and series) add up.
  const add = (values: Array<number | null>, row: Readonly<Record<string, unknown>>, column: string) => {
    const at = xIndex.get(JSON.stringify(row[options.x] ?? null))!
    const value = numberOf(row[column])
    if (value !== null) values[at] = (values[at] ?? 0) + value
  }
  let series: Array<ChartSeries>
  if (options.series !== null) {
    const seriesColumn = columnOf(options.series)
    const bySeries = new Map<string, { label: string; values: Array<number | null> }>()
    for (const row of rows) {
      const key = JSON.stringify(row[options.series] ?? null)
      const entry = bySeries.get(key) ?? { label: textOf(seriesColumn, row[options.series]), values: empty() }
      bySeries.set(key, entry)
      add(entry.values, row, options.y[0] ?? "")
    }
    series = [...bySeries.values()]
  } else {
    series = yColumns.map((column) => {
      const values = empty()
      for (const row of rows) add(values, row, column.name)
      return { label: column.label, values }
    })
  }
  return {
    type: options.type,
    xLabel: xColumn.label,
    yLabel: options.series === null ? yColumns.map((column) => column.label).join(", ") : yColumn.label,
    xs,
    series,
    formatY: (value) => numberText(yColumn, value)
  }
}

/** What one bar, point or slice is called: `Open: 12`, or `Shipped, March: 4` with several series. */
export const markName = (data: ChartData, seriesIndex: number, xIndex: number): string => {
  const value = data.series[seriesIndex]?.values[xIndex] ?? null
  const shown = value === null ? "none" : data.formatY(value)
  const x = data.xs[xIndex] ?? ""
  return data.series.length > 1 ? `${data.series[seriesIndex]!.label}, ${x}: ${shown}` : `${x}: ${shown}`
}

const TYPE_WORDS: Readonly<Record<ChartType, string>> = { bar: "Bar chart", line: "Line chart", area: "Area chart", pie: "Pie chart" }
/** A summary names at most this many values; the data table has them all. */
const SUMMARY_VALUES = 12

/** The chart in one sentence, for its accessible name. */
export const chartSummary = (data: ChartData): string => {
  const names = data.series.flatMap((_, s) => data.xs.map((__, x) => markName(data, s, x)))
  const listed = names.slice(0, SUMMARY_VALUES).join("; ")
  const more = names.length > SUMMARY_VALUES ? `; and ${names.length - SUMMARY_VALUES} more` : ""
  return `${TYPE_WORDS[data.type]} of ${data.yLabel} by ${data.xLabel}${names.length === 0 ? ": no data" : `: ${listed}${more}`}.`
}

/** About five round steps from `low` to `high` (both included in the range). */
export const ticks = (low: number, high: number): ReadonlyArray<number> => {
  if (low === high) return high === 0 ? [0, 1] : [Math.min(0, low), Math.max(0, high)]
  const raw = (high - low) / 5
  const magnitude = 10 ** Math.floor(Math.log10(raw))
  const step = [1, 2, 2.5, 5, 10].map((factor) => factor * magnitude).find((candidate) => candidate >= raw) ?? raw
  const start = Math.floor(low / step) * step
  const out: Array<number> = []
  for (let tick = start; tick < high + step - step * 1e-9; tick += step) out.push(Math.round(tick / step) * step)
  return out
}
