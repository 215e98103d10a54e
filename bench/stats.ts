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

/** Latencies counted by bucket of 0.01 ms (the key is the bucket's number), sparse: what the load generator reports, so slices can be merged. */
export type Histogram = Readonly<Record<string, number>>

/** The histogram of `latencies` (ms). */
export const histogramOf = (latencies: ReadonlyArray<number>): Histogram => {
  const counts: Record<string, number> = {}
  for (const latency of latencies) {
    const bucket = Math.round(latency * 100)
    counts[bucket] = (counts[bucket] ?? 0) + 1
  }
  return counts
}

export const mergeHistograms = (histograms: ReadonlyArray<Histogram>): Histogram => {
  const counts: Record<string, number> = {}
  for (const histogram of histograms) for (const [bucket, n] of Object.entries(histogram)) counts[bucket] = (counts[bucket] ?? 0) + n
  return counts
}

/** `percentile` (nearest rank) of the latencies a histogram counts, to its 0.01 ms. */
export const histogramPercentile = (histogram: Histogram, p: number): number => {
  const buckets = Object.entries(histogram).map(([bucket, n]) => [Number(bucket), n] as const).sort((a, b) => a[0] - b[0])
  const rank = Math.max(1, Math.ceil((p / 100) * buckets.reduce((total, [, n]) => total + n, 0)))
  let seen = 0
  for (const [bucket, n] of buckets) {
    seen += n
    if (seen >= rank) return bucket / 100
  }
  return Number.NaN
}
