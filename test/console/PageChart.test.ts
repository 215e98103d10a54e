/**
 * What a page's chart draws (console/src/pages/chartModel.ts): one bar per x value named by its
 * value, one series per y column or per value of the series column, and a missing column said.
 */
import { describe, expect, it } from "vitest"
import { chartData, chartSummary, markName, ticks } from "../../console/src/pages/chartModel.ts"
import { resultColumn } from "../../console/src/pages/format.ts"
import type { Schema } from "../../console/src/table/model.ts"

const schema: Schema = {
  relations: [],
  keys: [],
  stats: [],
  table_metadata: {},
  column_metadata: {
    orders: {
      status: { display_type: "choice", column_type: "choice", label: "Status", options: [{ value: "pending", label: "Pending" }, { value: "paid", label: "Paid" }] },
      total: { display_type: "currency", column_type: "currency", label: "Total" }
    }
  }
}
const columnOf = (name: string) => resultColumn(name, schema)

const names = (data: ReturnType<typeof chartData>) => {
  if ("error" in data) throw new Error(data.error)
  return data.series.flatMap((series, s) => series.values.flatMap((value, x) => (value === null ? [] : [markName(data, s, x)])))
}

describe("a page's chart", () => {
  it("has one bar per x value, named by its label and value (numeric strings read as numbers)", () => {
    const data = chartData([{ status: "pending", count: "12" }, { status: "paid", count: "3" }], { type: "bar", x: "status", y: ["count"], series: null }, columnOf)
    expect(names(data)).toEqual(["Pending: 12", "Paid: 3"])
    expect("error" in data ? "" : chartSummary(data)).toBe("Bar chart of Count by Status: Pending: 12; Paid: 3.")
  })

  it("makes a series per value of the series column, and one per y column without one, formatted by display type", () => {
    const rows = [
      { month: "Jan", status: "paid", total: "10.5" },
      { month: "Jan", status: "pending", total: "2" },
      { month: "Feb", status: "paid", total: "1200" }
    ]
    expect(names(chartData(rows, { type: "line", x: "month", y: ["total"], series: "status" }, columnOf))).toEqual([
      "Paid, Jan: 10.50", "Paid, Feb: 1,200.00", "Pending, Jan: 2.00"
    ])
    // Rows with the same x add up.
    expect(names(chartData([...rows, { month: "Jan", status: "paid", total: "1" }], { type: "bar", x: "month", y: ["total"], series: null }, columnOf))).toEqual([
      "Jan: 13.50", "Feb: 1,200.00"
    ])
    const two = chartData([{ month: "Jan", a: 1, b: 2 }], { type: "bar", x: "month", y: ["a", "b"], series: null }, columnOf)
    expect(names(two)).toEqual(["A, Jan: 1", "B, Jan: 2"])
  })

  it("says which column the rows lack", () => {
    const data = chartData([{ status: "paid", n: 1 }], { type: "bar", x: "status", y: ["count"], series: null }, columnOf)
    expect(data).toEqual({ error: "The query's rows have no column count (they have status, n)." })
  })

  it("puts round ticks around the values", () => {
    expect(ticks(0, 12)).toEqual([0, 2.5, 5, 7.5, 10, 12.5])
    expect(ticks(0, 0)).toEqual([0, 1])
  })
})
