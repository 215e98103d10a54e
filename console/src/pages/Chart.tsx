/**
 * Bar, line, area and pie charts as small SVG drawings (no chart library): the drawing is an image
 * named by a one-sentence summary, each bar, point and slice an image named by its value, a legend
 * when there are several series, and a "Show data" button that shows the numbers as a table.
 */
import { useState } from "preact/hooks"
import { type ChartData, chartSummary, markName, ticks } from "./chartModel.ts"

/** Distinguishable colours, each at least 3:1 against white. */
const COLORS = ["#0b5cad", "#c2410c", "#1a6330", "#7c3aed", "#a4111b", "#0e7490", "#8a5a00", "#be185d"]
const colorOf = (index: number) => COLORS[index % COLORS.length]!

const WIDTH = 640
const HEIGHT = 300
const LEFT = 92
const RIGHT = 16
const TOP = 16
const BOTTOM = 56

/** Longer x labels are cut short under the axis (the data table has them whole). */
const shortLabel = (text: string, room: number) => {
  const fits = Math.max(3, Math.floor(room / 7))
  return text.length > fits ? `${text.slice(0, fits - 1)}…` : text
}

const Axes = (props: { readonly data: ChartData; readonly scale: (value: number) => number; readonly steps: ReadonlyArray<number>; readonly band: number }) => {
  const { data, scale, steps, band } = props
  return (
    <g class="axes">
      {steps.map((step) => (
        <g key={step}>
          <line x1={LEFT} x2={WIDTH - RIGHT} y1={scale(step)} y2={scale(step)} class="grid" />
          <text x={LEFT - 6} y={scale(step)} text-anchor="end" dominant-baseline="middle">{data.formatY(step)}</text>
        </g>
      ))}
      <line x1={LEFT} x2={LEFT} y1={TOP} y2={HEIGHT - BOTTOM} class="axis" />
      <line x1={LEFT} x2={WIDTH - RIGHT} y1={HEIGHT - BOTTOM} y2={HEIGHT - BOTTOM} class="axis" />
      {data.xs.map((x, index) => (
        <text key={index} x={LEFT + band * (index + 0.5)} y={HEIGHT - BOTTOM + 16} text-anchor="middle">{shortLabel(x, band)}</text>
      ))}
      <text x={LEFT + (WIDTH - LEFT - RIGHT) / 2} y={HEIGHT - 8} text-anchor="middle" class="axis-label">{data.xLabel}</text>
      <text x={14} y={TOP + (HEIGHT - TOP - BOTTOM) / 2} text-anchor="middle" class="axis-label" transform={`rotate(-90 14 ${TOP + (HEIGHT - TOP - BOTTOM) / 2})`}>{data.yLabel}</text>
    </g>
  )
}

const Cartesian = (props: { readonly data: ChartData }) => {
  const { data } = props
  const values = data.series.flatMap((series) => series.values.filter((value): value is number => value !== null))
  const steps = ticks(Math.min(0, ...values), Math.max(0, ...values))
  const low = steps[0] ?? 0
  const high = steps.at(-1) ?? 1
  const scale = (value: number) => TOP + (HEIGHT - TOP - BOTTOM) * (1 - (value - low) / (high - low || 1))
  const band = (WIDTH - LEFT - RIGHT) / Math.max(1, data.xs.length)
  const zero = scale(Math.max(low, Math.min(0, high)))
  const centre = (index: number) => LEFT + band * (index + 0.5)
  return (
    <>
      <Axes data={data} scale={scale} steps={steps} band={band} />
      {data.type === "bar"
        ? data.series.map((series, s) => {
          const width = (band * 0.8) / data.series.length
          return (
            <g key={s} fill={colorOf(s)}>
              {series.values.map((value, x) => {
                if (value === null) return null
                const name = markName(data, s, x)
                return (
                  <rect key={x} role="img" aria-label={name} x={LEFT + band * x + band * 0.1 + width * s} width={Math.max(1, width - 1)}
                    y={Math.min(scale(value), zero)} height={Math.max(1, Math.abs(zero - scale(value)))}>
                    <title>{name}</title>
                  </rect>
                )
              })}
            </g>
          )
        })
        : data.series.map((series, s) => {
          const points = series.values.flatMap((value, x) => (value === null ? [] : [{ x, value }]))
          const line = points.map((point, i) => `${i === 0 ? "M" : "L"}${centre(point.x)},${scale(point.value)}`).join(" ")
          const first = points[0]
          const last = points.at(-1)
          return (
            <g key={s}>
              {data.type === "area" && first !== undefined && last !== undefined
                ? <path d={`${line} L${centre(last.x)},${zero} L${centre(first.x)},${zero} Z`} fill={colorOf(s)} fill-opacity="0.25" />
                : null}
              <path d={line} fill="none" stroke={colorOf(s)} stroke-width="2" />
              {points.map((point) => {
                const name = markName(data, s, point.x)
                return (
                  <circle key={point.x} role="img" aria-label={name} cx={centre(point.x)} cy={scale(point.value)} r="4" fill={colorOf(s)}>
                    <title>{name}</title>
                  </circle>
                )
              })}
            </g>
          )
        })}
    </>
  )
}

const Pie = (props: { readonly data: ChartData }) => {
  const { data } = props
  const values = (data.series[0]?.values ?? []).map((value) => (value === null || value < 0 ? 0 : value))
  const total = values.reduce((sum, value) => sum + value, 0)
  const cx = WIDTH / 2
  const cy = HEIGHT / 2
  const radius = HEIGHT / 2 - TOP
  let angle = -Math.PI / 2
  return (
    <>
      {values.map((value, x) => {
        if (value === 0 || total === 0) return null
        const name = `${markName(data, 0, x)} (${Math.round((value / total) * 100)} %)`
        const start = angle
        angle += (value / total) * Math.PI * 2
        const whole = value === total
        const large = angle - start > Math.PI ? 1 : 0
        const point = (at: number) => `${cx + radius * Math.cos(at)},${cy + radius * Math.sin(at)}`
        return whole
          ? <circle key={x} role="img" aria-label={name} cx={cx} cy={cy} r={radius} fill={colorOf(x)}><title>{name}</title></circle>
          : (
            <path key={x} role="img" aria-label={name} d={`M${cx},${cy} L${point(start)} A${radius},${radius} 0 ${large} 1 ${point(angle)} Z`} fill={colorOf(x)} stroke="#fff">
              <title>{name}</title>
            </path>
          )
      })}
    </>
  )
}

export const Chart = (props: { readonly data: ChartData; readonly title: string }) => {
  const { data } = props
  const [showData, setShowData] = useState(false)
  const legend = data.type === "pie" ? data.xs : data.series.length > 1 ? data.series.map((series) => series.label) : []
  return (
    <figure class="chart">
      <figcaption>{props.title}</figcaption>
      <svg role="img" aria-label={chartSummary(data)} viewBox={`0 0 ${WIDTH} ${HEIGHT}`} preserveAspectRatio="xMidYMid meet">
        {data.type === "pie" ? <Pie data={data} /> : <Cartesian data={data} />}
      </svg>
      {legend.length > 0
        ? (
          <ul class="legend" aria-label={`Legend of ${props.title}`}>
            {legend.map((label, index) => <li key={index}><span class="swatch" aria-hidden="true" style={{ background: colorOf(index) }} />{label}</li>)}
          </ul>
        )
        : null}
      <button type="button" class="secondary small" aria-expanded={showData} onClick={() => setShowData(!showData)}>
        {showData ? "Hide data" : "Show data"}
        <span class="visually-hidden"> of {props.title}</span>
      </button>
      {showData
        ? (
          <table>
            <caption>Data of {props.title}</caption>
            <thead>
              <tr>
                <th scope="col">{data.xLabel}</th>
                {data.series.map((series, s) => <th key={s} scope="col">{series.label}</th>)}
              </tr>
            </thead>
            <tbody>
              {data.xs.map((x, index) => (
                <tr key={index}>
                  <th scope="row">{x}</th>
                  {data.series.map((series, s) => {
                    const value = series.values[index] ?? null
                    return <td key={s} class="type-number">{value === null ? "" : data.formatY(value)}</td>
                  })}
                </tr>
              ))}
            </tbody>
          </table>
        )
        : null}
    </figure>
  )
}
