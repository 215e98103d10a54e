/**
 * The console on the main service: `GET /` and `GET /console` lead to `/console/`, which serves the
 * built console (src/layers/ConsoleBuild.ts): its files, `index.html` for every other path (the
 * console's own routes, e.g. the magic link's `/console/auth/callback`), and `config.json`, what the
 * console needs to know of this deployment. It answers what no API route matches, as a web server's
 * static files do: it is the web app, not the API, so `/openapi.json` does not list it, and it needs
 * no tenant (its files are the same for all).
 */
import { Effect, Option } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import { readFile } from "node:fs/promises"
import path from "node:path"
import { CONSOLE_PATH, type ConfigShape } from "../services/PlinthConfig.ts"
import type { Fallback } from "./HttpServerLive.ts"

const PREFIX = `${CONSOLE_PATH}/`

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".txt": "text/plain; charset=utf-8"
}

/** A segment of a file's path: no dot file, no `..`, no separator of any platform. */
const FILE_SEGMENT = /^[A-Za-z0-9_-][A-Za-z0-9_.-]*$/

/** Hashed names (`assets/main-1a2b3c.js`) never change content: browsers keep them. */
const IMMUTABLE = "public, max-age=31536000, immutable"

/** The bot check's script and frame, where a site key is configured (CHALLENGE_SITE_KEY). */
const CHALLENGE_ORIGIN = "https://challenges.cloudflare.com"

const notFound = HttpServerResponse.jsonUnsafe({ error: "not found" }, { status: 404 })
const malformed = HttpServerResponse.jsonUnsafe({ error: "malformed URL" }, { status: 400 })
const toConsole = HttpServerResponse.redirect(PREFIX, { status: 302 })

export interface ConsoleConfig {
  /** Where the console reaches the chat service. */
  readonly chatUrl: string
  /** The bot check's site key (Cloudflare Turnstile), when the bot check is on. */
  readonly challengeSiteKey: string | null
  /** Whether `POST /auth/login` exists (not in production). */
  readonly passwordSignIn: boolean
  /** Whether requests need `X-Tenant` (MULTI_TENANT). */
  readonly multiTenant: boolean
}

/** The console, from the files of `outputDir`: the main service's fallback (HttpServerLive.ts). */
export const serveConsole = (outputDir: string, config: ConfigShape): Fallback => {
  const chatUrl = config.chatUrl.href.replace(/\/$/, "")
  const siteKey = Option.getOrNull(config.challengeSiteKey)
  const consoleConfig: ConsoleConfig = {
    chatUrl,
    challengeSiteKey: siteKey,
    passwordSignIn: !config.isProduction,
    multiTenant: config.multiTenant
  }
  const configResponse = HttpServerResponse.jsonUnsafe(consoleConfig, { headers: { "cache-control": "no-store" } })
  const challenge = siteKey === null ? "" : ` ${CHALLENGE_ORIGIN}`
  // The console's pages load nothing but its own files (and the bot check's, when on), call only
  // this service and the chat service, and may not be framed; a link's token goes to no third party.
  const pageHeaders = {
    "content-security-policy": [
      "default-src 'self'",
      `script-src 'self'${challenge}`,
      `frame-src${challenge || " 'none'"}`,
      `connect-src 'self' ${new URL(chatUrl).origin}`,
      "img-src 'self' data:",
      "style-src 'self'",
      "object-src 'none'",
      "base-uri 'none'",
      "form-action 'self'",
      "frame-ancestors 'none'"
    ].join("; "),
    "referrer-policy": "no-referrer",
    "x-content-type-options": "nosniff",
    "cache-control": "no-cache"
  }
  const assetHeaders = { "cache-control": IMMUTABLE, "x-content-type-options": "nosniff" }

  /** A file of the output, gzipped when the browser takes it (the build wrote both). */
  const file = (request: HttpServerRequest.HttpServerRequest, name: string, headers: Record<string, string>) => {
    const gzip = /\bgzip\b/.test(request.headers["accept-encoding"] ?? "")
    const full = path.join(outputDir, name)
    return Effect.tryPromise(() => readFile(gzip ? `${full}.gz` : full)).pipe(
      Effect.map((body) =>
        HttpServerResponse.uint8Array(body, {
          contentType: CONTENT_TYPES[path.extname(name)] ?? "application/octet-stream",
          headers: { ...headers, vary: "accept-encoding", ...(gzip ? { "content-encoding": "gzip" } : {}) }
        })
      ),
      Effect.catch(() =>
        Effect.succeed(
          name === "index.html"
            ? HttpServerResponse.jsonUnsafe({ error: "the console is not built yet: run npm run build, or wait for npm start to build it" }, {
              status: 503
            })
            : notFound
        )
      )
    )
  }

  return (request) => {
    const pathname = request.url.split("?")[0] ?? "/"
    if (request.method !== "GET" || !(pathname === "/" || pathname === CONSOLE_PATH || pathname.startsWith(PREFIX))) {
      return Effect.succeed(notFound)
    }
    if (pathname === "/" || pathname === CONSOLE_PATH) return Effect.succeed(toConsole)
    let rest: string
    try {
      rest = decodeURIComponent(pathname.slice(PREFIX.length))
    } catch {
      return Effect.succeed(malformed)
    }
    const segments = rest.split("/")
    // Never a way out of the output folder, whatever a client sends.
    if (segments.some((segment) => segment === ".." || segment === "." || /[\\\0]/.test(segment))) return Effect.succeed(malformed)
    if (rest === "config.json") return Effect.succeed(configResponse)
    // A name with an extension is a file of the build; anything else is a screen of the console.
    if (!(segments.at(-1) ?? "").includes(".")) return file(request, "index.html", pageHeaders)
    if (!segments.every((segment) => FILE_SEGMENT.test(segment))) return Effect.succeed(notFound)
    return file(request, rest, rest === "index.html" ? pageHeaders : assetHeaders)
  }
}
