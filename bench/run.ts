/**
 * `npm run bench`: load and latency benchmarks, each beside a raw baseline measured in the same
 * run. The scenarios arrive with the Performance issue; until then there is nothing to measure.
 */
console.log("no benchmarks yet")
