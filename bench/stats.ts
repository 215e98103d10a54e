/**
 * Percentiles of the bench's samples, by the nearest-rank method: the p-th percentile of n sorted
 * samples is the ⌈p/100 · n⌉-th of them (of 100 samples, the p99 is the second slowest and the
 * p50 the 50th). Kept apart from support.ts so the load generator's process loads nothing else.
 */
export const percentile = (sorted: ReadonlyArray<number>, p: number): number =>
  sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN

export const summarize = (samples: ReadonlyArray<number>) => {
  const sorted = [...samples].sort((a, b) => a - b)
  return { min: sorted[0] ?? Number.NaN, p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted.at(-1) ?? Number.NaN }
}

/** A summary's `min / median / max`, as the report's tables show rounds; the median in bold where a target is held to it. */
export const spread = (summary: { readonly min: number; readonly p50: number; readonly max: number }, digits: number, boldMedian = false) => {
  const median = summary.p50.toFixed(digits)
  return `${summary.min.toFixed(digits)} / ${boldMedian ? `**${median}**` : median} / ${summary.max.toFixed(digits)}`
}
