/**
 * The load generator of the HTTP benchmarks, in a process of its own (autocannon): POSTs JSON
 * bodies to one path, each request as a random one of the given users, and prints one JSON line
 * with requests per second and latency percentiles.
 * Usage: node bench/http-load.ts <plan.json: {url, connections, seconds, warmupSeconds, requests: [{token, body}]}>
 */
// @ts-expect-error autocannon ships no types
import autocannon from "autocannon"
import { readFileSync } from "node:fs"

interface Plan {
  readonly url: string
  readonly connections: number
  readonly seconds: number
  readonly warmupSeconds: number
  readonly requests: ReadonlyArray<{ readonly token: string; readonly body: string }>
}

interface Result {
  readonly requests: { readonly average: number }
  readonly latency: { readonly p50: number; readonly p99: number }
  readonly non2xx: number
  readonly errors: number
}

const plan = JSON.parse(readFileSync(process.argv[2] ?? "", "utf8")) as Plan
const pick = () => plan.requests[Math.floor(Math.random() * plan.requests.length)]!

const run = (seconds: number) =>
  new Promise<Result>((resolve, reject) =>
    autocannon({
      url: plan.url,
      connections: plan.connections,
      duration: seconds,
      requests: [{
        method: "POST",
        setupRequest: (request: Record<string, unknown>) => {
          const next = pick()
          return { ...request, headers: { "content-type": "application/json", authorization: `Bearer ${next.token}` }, body: next.body }
        }
      }]
    }, (error: unknown, result: Result) => (error ? reject(error) : resolve(result))))

if (plan.warmupSeconds > 0) await run(plan.warmupSeconds)
const result = await run(plan.seconds)
process.stdout.write(`${JSON.stringify({ rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, non2xx: result.non2xx, errors: result.errors })}\n`)
