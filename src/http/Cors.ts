/**
 * Cross-origin requests from browsers (CORS): which origins may call a service (CORS_ORIGINS), the
 * headers their responses carry, and the answer to a preflight. No cookies are used, so there is no
 * credentials mode. A page of an origin that is not allowed gets no CORS headers: its browser
 * withholds the answer.
 */
import { Context } from "effect"

const ALLOW_METHODS = "GET, POST, PATCH, DELETE"
/** What a browser may send besides the headers it always may. */
const ALLOW_HEADERS = "Authorization, Content-Type, X-App-Schema, X-Tenant, X-Request-Id"
const EXPOSE_HEADERS = "X-Request-Id, Retry-After"
/** Chromium holds a preflight's answer for at most two hours. */
const MAX_AGE = "7200"

/** Headers to add to a response, by name. */
export type CorsHeaders = Readonly<Record<string, string>>

export interface CorsPolicy {
  /** The headers of every response to a request with `Origin: origin` (only `Vary` when not allowed). */
  readonly headers: (origin: string) => CorsHeaders
  /** The headers of the answer to a preflight from `origin` (only `Vary` when not allowed). */
  readonly preflight: (origin: string) => CorsHeaders
  /** `headers(origin)` as lines of a response head written by hand (GET /events). */
  readonly headLines: (origin: string | undefined) => string
}

const VARY_ONLY: CorsHeaders = { vary: "Origin" }

/**
 * The policy of a list of origins as PlinthConfig keeps them (`*`, `https://app.example.com`,
 * `http://localhost:*`). With `*` every page may call and is answered `Access-Control-Allow-Origin: *`
 * (whatever its origin, `null` included), so no origin is written back.
 */
export const makeCorsPolicy = (origins: ReadonlyArray<string>): CorsPolicy => {
  const any = origins.includes("*")
  const exact = new Set(origins.filter((origin) => origin !== "*" && !origin.endsWith(":*")))
  // `http://localhost:*` allows `http://localhost` and `http://localhost:<port>`.
  const anyPort = origins.filter((origin) => origin.endsWith(":*")).map((origin) => origin.slice(0, -2))
  const allowed = (origin: string): boolean => {
    if (any || exact.has(origin)) return true
    for (const base of anyPort) {
      if (origin === base || (origin.startsWith(base) && /^:\d{1,5}$/.test(origin.slice(base.length)))) return true
    }
    return false
  }
  // Written into a response only when allowed: then it is one of the list's origins, or one with digits for a port.
  const allowOrigin = (origin: string) => (any ? "*" : origin)
  const headers = (origin: string): CorsHeaders =>
    allowed(origin)
      ? { "access-control-allow-origin": allowOrigin(origin), "access-control-expose-headers": EXPOSE_HEADERS, vary: "Origin" }
      : VARY_ONLY
  return {
    headers,
    preflight: (origin) =>
      allowed(origin)
        ? {
          "access-control-allow-origin": allowOrigin(origin),
          "access-control-allow-methods": ALLOW_METHODS,
          "access-control-allow-headers": ALLOW_HEADERS,
          "access-control-max-age": MAX_AGE,
          vary: "Origin"
        }
        : VARY_ONLY,
    headLines: (origin) => {
      if (origin === undefined) return ""
      let lines = ""
      for (const [name, value] of Object.entries(headers(origin))) lines += `${name}: ${value}\r\n`
      return lines
    }
  }
}

/** No origin is allowed (a server started without a policy: tests of the HTTP machinery). */
export const NO_CORS = makeCorsPolicy([])

/** The policy of the server a request came to: the events route writes its response head itself. */
export const Cors = Context.Reference<CorsPolicy>("plinth/Cors", { defaultValue: () => NO_CORS })

/** Whether a request that has an `Origin` is a browser's preflight: `OPTIONS` naming the method it asks about. */
export const isPreflight = (method: string, headers: Readonly<Record<string, string | undefined>>): boolean =>
  method === "OPTIONS" && headers["access-control-request-method"] !== undefined
