/**
 * Reliability: a fast-check fuzzer sends ≥ 2,000 hostile requests to every JSON endpoint of both
 * services (random bodies and headers: wrong types, nulls, huge strings, deep nesting, non-JSON,
 * odd content types, bodies around the 1 MiB limit; random Authorization, X-App-Schema, X-Tenant).
 *
 * Every answer must be < 500 (a 503 counts as a failure: nothing here makes the database busy),
 * every 4xx must carry a JSON `{error}` (a string, or the structured database error of /sql and
 * /function), nothing may take longer than REQUEST_TIMEOUT_MS, no server error may be logged, and
 * after each endpoint both services must still be healthy and answer a normal request.
 *
 * Bugs the fuzzer found are pinned at the end, each by the smallest request that showed it.
 *
 * Seed: FUZZ_SEED (default below) and FUZZ_RUNS (requests per endpoint, default 2,000; the soak
 * sends 10,000). Requests are generated and sent in chunks and only failures are kept, so memory
 * stays flat however many runs are asked for.
 */
import { Cause, Logger, References } from "effect"
import fc from "fast-check"
import { SignJWT } from "jose"
import { randomUUID } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { inviteAsDatabaseAdmin, mailEnv, type SignIn, verify } from "../support/auth.ts"
import { createTestDatabase, query, type TestDatabase } from "../support/database.ts"
import { type FakeAnthropic, startFakeAnthropic } from "../support/FakeAnthropic.ts"
import { type FakeMailApi, startFakeMailApi } from "../support/FakeMailApi.ts"
import { serveInProcess, TEST_JWT_SECRET } from "../support/services.ts"
import {
  argumentsText,
  authorization,
  bodiesAroundTheLimit,
  bodyFor,
  type FuzzRequest,
  functionPath,
  headersFor,
  jsonString,
  nastyString,
  plausibleContent,
  plausibleEmail,
  plausibleParams,
  plausiblePassword,
  plausibleRole,
  plausibleSql,
  plausibleTitle,
  plausibleToken,
  requestOf,
  scalarText,
  shapedObjectText,
  type Tokens,
  wrongValueText
} from "./fuzzBodies.ts"

const SEED = Number(process.env["FUZZ_SEED"] ?? 20_260_611)
const RUNS = Number(process.env["FUZZ_RUNS"] ?? 2_000)
const CONCURRENCY = 16
const REQUEST_TIMEOUT_MS = 10_000
const TEST_TIMEOUT_MS = Math.max(240_000, RUNS * 60)
/** The client-address header the stack trusts (CLIENT_IP_HEADER): random per request, so the magic-link limits do not starve the fuzz. */
const CLIENT_IP_HEADER = "x-fuzz-client"

// ---------------------------------------------------------------------------------------------
// The stack: what test/support/chat.ts's startChatStack builds (a database, the fake mail API and
// model, the main and chat services), plus multi-tenant twins of both, started here with a logger
// that keeps each error's cause and the id of the request it belongs to (support's captureLogs
// keeps neither), so every failure is reported with its server log line.

interface ServerLog {
  readonly service: string
  readonly level: string
  readonly requestId: string
  readonly text: string
}

/**
 * The services' Error and Fatal lines (any one fails the run; kept up to a bound) and the last
 * Warn lines (context for a failing request, which is recent when it is reported).
 */
const serverLogs = {
  errors: [] as Array<ServerLog>,
  warnings: [] as Array<ServerLog>,
  keep(log: ServerLog): void {
    if (log.level === "Warn") {
      this.warnings.push(log)
      if (this.warnings.length > 1_000) this.warnings.shift()
    } else if (this.errors.length < 1_000) this.errors.push(log)
  },
  of(requestId: string): Array<ServerLog> {
    return [...this.errors, ...this.warnings].filter((log) => log.requestId === requestId)
  }
}

interface Service {
  readonly name: string
  readonly url: string
  readonly close: () => Promise<void>
}

/** A cause in one line: its first line, the innermost causes (PostgreSQL's message), and the first frame in src/. */
const summarize = (pretty: string): string => {
  const lines = pretty.split("\n").map((line) => line.trim())
  const causes = lines.filter((line) => line.startsWith("[cause]:")).map((line) => line.replace(/^\[cause\]: /, ""))
  const frame = lines.find((line) => line.startsWith("at ") && line.includes("/src/") && !line.includes("node_modules"))
  return [lines[0], ...causes.slice(-1), frame].filter((line) => line !== undefined).join(" | ")
}

const startLoggedService = async (which: "main" | "chat", name: string, databaseUrl: string, env: Record<string, string>): Promise<Service> => {
  const logger = Logger.make(({ cause, fiber, logLevel, message }) => {
    if (logLevel !== "Error" && logLevel !== "Fatal" && logLevel !== "Warn") return
    const parts = (Array.isArray(message) ? message : [message]).map(String).join(" ")
    serverLogs.keep({
      service: name,
      level: logLevel,
      requestId: String(fiber.getRef(References.CurrentLogAnnotations).requestId ?? ""),
      text: cause.reasons.length > 0 ? `${parts}: ${summarize(Cause.pretty(cause))}` : parts
    })
  })
  return { name, ...(await serveInProcess(which, name, databaseUrl, env, Logger.layer([logger]))) }
}

let db: TestDatabase
let mail: FakeMailApi
let model: FakeAnthropic
let main: Service
let chat: Service
let tenantMain: Service
let tenantChat: Service
let owner: SignIn
let staff: SignIn
let tenantOwner: SignIn
let tokens: Tokens
let tenantTokens: Tokens
/** Signed with the real secret for a user id that does not exist (a deleted user's token looks like this). */
let ghostToken: string
const conversations: Array<string> = []
const continuable: Array<string> = []
let foreignConversation: string
let legacyConversation: string
const legacyMessages: Array<string> = []
const magicLinkTokens: Array<string> = []

const admin = (text: string, params: ReadonlyArray<unknown> = []) =>
  query(db.adminUrl, (sql) => sql.unsafe<Record<string, unknown>>(text, params as Array<unknown>))

const base64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url")

type SignOptions = { secret?: Uint8Array; alg?: string; sub?: string; iat?: number; exp?: number }

const sign = (good: SignIn, payload: Record<string, unknown>, options: SignOptions = {}) => {
  const now = Math.floor(Date.now() / 1000)
  return new SignJWT(payload)
    .setProtectedHeader({ alg: options.alg ?? "HS256", typ: "JWT" })
    .setSubject(options.sub ?? good.user.id)
    .setIssuedAt(options.iat ?? now)
    .setExpirationTime(options.exp ?? now + 3_600)
    .sign(options.secret ?? new TextEncoder().encode(TEST_JWT_SECRET))
}

const GHOST_USER = "00000000-0000-4000-8000-000000000000"

/** JWTs that must not get past authentication (or only as far as a 403). */
const forgedTokens = async (good: SignIn, extra: ReadonlyArray<string>): Promise<ReadonlyArray<string>> => {
  const now = Math.floor(Date.now() / 1000)
  const claims = { role: good.user.role, email: good.user.email }
  const forge = (payload: Record<string, unknown>, options: SignOptions = {}) => sign(good, payload, options)
  const tampered = good.token.slice(0, -2) + (good.token.endsWith("AA") ? "BB" : "AA")
  return [
    ...extra,
    tampered,
    await forge(claims, { iat: now - 7_200, exp: now - 3_600 }),
    await forge(claims, { secret: new TextEncoder().encode("another-secret-0123456789abcdef0123456789") }),
    await forge(claims, { alg: "HS512" }),
    await forge({ ...claims, role: "superuser" }),
    await forge({ ...claims, role: "anon" }),
    await forge({ role: good.user.role }),
    await forge(claims, { sub: "not-a-uuid" }),
    await forge({ ...claims, tenant: "acme" }),
    `${base64url({ alg: "none", typ: "JWT" })}.${base64url({ ...claims, sub: good.user.id, iat: now, exp: now + 3_600 })}.`
  ]
}

const asJson = async (response: Response) => {
  const text = await response.text()
  return { status: response.status, body: text === "" ? undefined : (JSON.parse(text) as unknown) }
}

const postJson = (base: string, path: string, body: unknown, token?: string, headers: Record<string, string> = {}) =>
  fetch(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token === undefined ? {} : { authorization: `Bearer ${token}` }), ...headers },
    body: JSON.stringify(body)
  }).then(asJson)

const sqlAsOwner = async (text: string, params: ReadonlyArray<unknown> = []) => {
  const response = await postJson(main.url, "/sql", { sql: text, params }, owner.token)
  if (response.status !== 200) throw new Error(`${text}: ${response.status} ${JSON.stringify(response.body)}`)
  return response.body as { rows: Array<Record<string, unknown>> }
}

const createConversation = async (token: string, base = chat.url, headers: Record<string, string> = {}) => {
  const response = await postJson(base, "/conversations", { title: "fuzz" }, token, headers)
  if (response.status !== 201) throw new Error(`create conversation: ${response.status} ${JSON.stringify(response.body)}`)
  return (response.body as { id: string }).id
}

beforeAll(async () => {
  db = await createTestDatabase()
  mail = await startFakeMailApi()
  model = await startFakeAnthropic()
  const env = {
    ...mailEnv(mail),
    ANTHROPIC_API_KEY: "sk-test",
    ANTHROPIC_BASE_URL: model.url,
    ANTHROPIC_MODEL: "claude-test",
    CLIENT_IP_HEADER,
    LOG_LEVEL: "warn"
  }
  main = await startLoggedService("main", "main", db.mainUrl, env)
  chat = await startLoggedService("chat", "chat", db.chatUrl, env)
  // Multi-tenant services whose one registered tenant is this very database.
  await admin("INSERT INTO plinth.tenants (name) VALUES ($1)", [db.name])
  tenantMain = await startLoggedService("main", "main (multi-tenant)", db.mainUrl, { ...env, MULTI_TENANT: "true" })
  tenantChat = await startLoggedService("chat", "chat (multi-tenant)", db.chatUrl, { ...env, MULTI_TENANT: "true" })

  owner = await verify(main.url, await inviteAsDatabaseAdmin(db, "fuzz-owner@plinth.test", "owner"))
  staff = await verify(main.url, await inviteAsDatabaseAdmin(db, "fuzz-staff@plinth.test", "staff"))
  const other = await verify(main.url, await inviteAsDatabaseAdmin(db, "fuzz-other@plinth.test", "owner"))
  const tenantLink = await inviteAsDatabaseAdmin(db, "fuzz-tenant-owner@plinth.test", "owner")
  const tenantSignIn = await postJson(tenantMain.url, "/auth/magic-link/verify", { token: tenantLink }, undefined, { "x-tenant": db.name })
  if (tenantSignIn.status !== 200) throw new Error(`tenant sign-in: ${tenantSignIn.status} ${JSON.stringify(tenantSignIn.body)}`)
  tenantOwner = tenantSignIn.body as SignIn
  ghostToken = await sign(owner, { role: "owner", email: "ghost@plinth.test" }, { sub: GHOST_USER })
  tokens = { good: owner.token, others: await forgedTokens(owner, [staff.token, other.token, tenantOwner.token, ghostToken]) }
  tenantTokens = { good: tenantOwner.token, others: await forgedTokens(tenantOwner, [owner.token, staff.token]) }

  // Something for the fuzz to reach: an app, a managed table with several column types, pages.
  await sqlAsOwner("SELECT sys.create_app('fuzz_app', 'Fuzz', 'fuzzing')")
  await sqlAsOwner(
    "SELECT sys.create_table('fuzz_items', $1::jsonb)",
    [[
      { name: "name", type: "text" },
      { name: "amount", type: "numeric" },
      { name: "flag", type: "boolean" },
      { name: "due", type: "date" },
      { name: "meta", type: "json" },
      { name: "kind", type: "choice", options: [{ value: "a" }, { value: "b" }] }
    ]]
  )
  await sqlAsOwner("INSERT INTO fuzz_items (name, amount) VALUES ('first', 1), ('second', 2)")
  await sqlAsOwner("SELECT sys.create_page('home', 'Home', 'source')")

  // Real one-time sign-in links, so some verifications succeed.
  for (let index = 0; index < 40; index++) {
    const [row] = await admin("SELECT sys.create_magic_link('fuzz-owner@plinth.test') AS token")
    magicLinkTokens.push(String(row!["token"]))
  }

  for (let index = 0; index < 16; index++) conversations.push(await createConversation(owner.token))
  foreignConversation = await createConversation(other.token)

  // Conversations whose latest message is a completed tool call: /continue may start a reply there.
  for (let index = 0; index < 8; index++) {
    const id = await createConversation(owner.token)
    await admin(
      `INSERT INTO sys.messages (conversation_id, role, content, status) VALUES
        ($1, 'user', '{"type":"text","text":"plan it"}', 'complete'),
        ($1, 'assistant', $2::jsonb, 'complete')`,
      [id, JSON.stringify({
        type: "tool_call",
        tool_calls: [{ id: `toolu_fuzz${index}`, name: "propose_plan", args: { steps: ["a"] } }],
        tool_result: { result: "Plan presented" }
      })]
    )
    continuable.push(id)
  }

  // Legacy tool calls waiting for approval (execute-tool), of every tool.
  legacyConversation = await createConversation(owner.token)
  const calls: ReadonlyArray<readonly [string, Record<string, unknown>]> = [
    ["propose_plan", { steps: ["a", "b"] }],
    ["preview_page", { source: "x" }],
    ["select_data", { sql: "SELECT 1 AS one" }],
    ["propose_create_page", { slug: "fuzz-page", title: "t", source: "s" }],
    ["propose_update_page", { slug: "home", title: "Home 2" }],
    ["propose_delete_rows", { table_name: "fuzz_items", where: "false" }],
    ["propose_update_rows", { table_name: "fuzz_items", values: { name: "x" }, where: "false" }],
    ["propose_seed_data", { table_name: "fuzz_items", rows: [{ name: "seeded" }] }],
    ["propose_create_table", { table_name: "fuzz_other", columns: [{ name: "a", type: "text" }] }],
    ["propose_alter_table", { table_name: "fuzz_items", operations: [{ op: "set_display_columns", columns: ["name"] }] }],
    ["configure_fk_display", { table_name: "fuzz_items", columns: ["name"] }],
    ["propose_create_view", { view_name: "fuzz_view", sql: "SELECT 1 AS one" }],
    ["no_such_tool", {}]
  ]
  const contents = Array.from({ length: 300 }, (_, index) => {
    const [name, args] = calls[index % calls.length]!
    return { type: "tool_call", tool_calls: [{ id: `toolu_legacy${index}`, name, args }] }
  })
  const inserted = await admin(
    `INSERT INTO sys.messages (conversation_id, role, content, status)
     SELECT $1, 'assistant', c, 'pending_approval' FROM jsonb_array_elements($2::jsonb) AS c RETURNING id::text AS id`,
    [legacyConversation, JSON.stringify(contents)]
  )
  legacyMessages.push(...inserted.map((row) => String(row["id"])))
}, 120_000)

afterAll(async () => {
  await tenantChat?.close()
  await tenantMain?.close()
  await chat?.close()
  await main?.close()
  await model?.close()
  await mail?.close()
  await db?.drop()
})

// ---------------------------------------------------------------------------------------------
// ---------------------------------------------------------------------------------------------
// Sending and judging

interface Endpoint {
  readonly name: string
  readonly service: () => Service
  /** Whether the route decodes a JSON payload (content type and body matter). */
  readonly payload: boolean
  /** /sql and /function answer database errors in the structured shape. */
  readonly structuredErrors: boolean
  /** The field the size-limit bodies fill, or undefined for routes without a payload. */
  readonly limitField: string | undefined
  readonly requests: () => fc.Arbitrary<FuzzRequest>
}

interface Outcome {
  readonly request: FuzzRequest
  readonly requestId: string
  readonly status: number | undefined
  readonly problem: string | undefined
  readonly response: string
  readonly ms: number
}

const preview = (value: string | Uint8Array | undefined, max = 240): string => {
  if (value === undefined) return "(none)"
  const text = typeof value === "string" ? value : `bytes:${Buffer.from(value.subarray(0, max)).toString("hex")}`
  const shown = JSON.stringify(text.length > max ? `${text.slice(0, max)}…` : text)
  return `${shown} (${typeof value === "string" ? value.length : value.byteLength} ${typeof value === "string" ? "chars" : "bytes"})`
}

const isStructuredError = (error: unknown) => {
  if (typeof error !== "object" || error === null) return false
  const fields = error as Record<string, unknown>
  return typeof fields["message"] === "string" && typeof fields["code"] === "string" &&
    (fields["detail"] === null || typeof fields["detail"] === "string") &&
    (fields["hint"] === null || typeof fields["hint"] === "string") &&
    (fields["position"] === null || Number.isInteger(fields["position"]))
}

const field = (body: unknown, key: string): unknown =>
  typeof body === "object" && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>)[key] : undefined

/** What is wrong with an answer, if anything. */
const judge = (endpoint: Endpoint, status: number, contentType: string | null, text: string): string | undefined => {
  if (status >= 500) return `status ${status}`
  if (contentType?.includes("text/event-stream")) {
    if (status !== 200) return `event stream with status ${status}`
    const errors = text.split("\n\n").filter((frame) => /^event: error$/m.test(frame))
    return errors.length > 0 ? `the stream carried ${errors.join(" | ")}` : undefined
  }
  if (status === 204 && text === "") return undefined
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    return `status ${status} with a body that is not JSON (content-type ${contentType})`
  }
  if (!contentType?.includes("application/json")) return `JSON answer with content-type ${contentType}`
  if (status >= 400) {
    const error = field(body, "error")
    if (typeof error === "string" && error.length > 0) return undefined
    if (endpoint.structuredErrors && isStructuredError(error)) return undefined
    return `status ${status} without an {error} body`
  }
  return undefined
}

let requestCounter = 0

const send = async (endpoint: Endpoint, request: FuzzRequest): Promise<Outcome> => {
  const requestId = `fuzz-${++requestCounter}`
  const started = performance.now()
  try {
    const response = await fetch(`${endpoint.service().url}${request.path}`, {
      method: request.method,
      headers: { ...request.headers, "x-request-id": requestId },
      ...(request.body === undefined || request.method === "GET" ? {} : { body: request.body }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS)
    })
    const text = await response.text()
    const ms = performance.now() - started
    const problem = judge(endpoint, response.status, response.headers.get("content-type"), text)
    return { request, requestId, status: response.status, problem, response: text.slice(0, 300), ms }
  } catch (error) {
    const ms = performance.now() - started
    const name = (error as { name?: string }).name
    const problem = name === "TimeoutError" || name === "AbortError"
      ? `no answer within ${REQUEST_TIMEOUT_MS} ms (hang)`
      : `request failed: ${String(error)} ${String((error as { cause?: unknown }).cause ?? "")}`
    return { request, requestId, status: undefined, problem, response: "", ms }
  }
}

/** Runs `run` over `items`, `concurrency` at a time. */
const runConcurrently = async <A>(items: ReadonlyArray<A>, concurrency: number, run: (item: A) => Promise<void>): Promise<void> => {
  let next = 0
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < items.length) await run(items[next++]!)
  }))
}

/** What a run keeps of its outcomes: statuses per kind of body, the slowest answer, and the failures. */
class Tally {
  readonly statusesByKind = new Map<string, Map<string, number>>()
  readonly failures: Array<Outcome> = []
  readonly failedIds = new Set<string>()
  sent = 0
  slowest = 0

  add(outcome: Outcome): void {
    this.sent++
    this.slowest = Math.max(this.slowest, outcome.ms)
    const kind = outcome.request.kind.split(":")[0]!
    const statuses = this.statusesByKind.get(kind) ?? new Map<string, number>()
    const key = String(outcome.status ?? "err")
    statuses.set(key, (statuses.get(key) ?? 0) + 1)
    this.statusesByKind.set(kind, statuses)
    if (outcome.problem === undefined) return
    this.failedIds.add(outcome.requestId)
    if (this.failures.length < 12) this.failures.push(outcome)
  }
}

/** Generated and sent this many at a time: a 10,000-request run must not hold 10,000 bodies of up to 1 MiB. */
const CHUNK = 500

/** After a run: both services (and their multi-tenant twins) alive, ready, and doing normal work. */
const checkHealthy = async (): Promise<Array<string>> => {
  const problems: Array<string> = []
  for (const service of [main, chat, tenantMain, tenantChat]) {
    for (const path of ["/health", "/ready"]) {
      const response = await fetch(`${service.url}${path}`, { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) }).then(asJson).catch((error: unknown) => ({ status: 0, body: String(error) }))
      if (response.status !== 200) problems.push(`${service.name} GET ${path}: ${response.status} ${JSON.stringify(response.body)}`)
    }
  }
  const select = await postJson(main.url, "/sql", { sql: "SELECT 1 AS one" }, owner.token)
  if (select.status !== 200 || JSON.stringify(select.body) !== "{\"rows\":[{\"one\":1}],\"rowCount\":1}") {
    problems.push(`main POST /sql SELECT 1: ${select.status} ${JSON.stringify(select.body)}`)
  }
  const list = await fetch(`${chat.url}/conversations`, { headers: { authorization: `Bearer ${owner.token}` } }).then(asJson)
  if (list.status !== 200) problems.push(`chat GET /conversations: ${list.status} ${JSON.stringify(list.body)}`)
  const tenantSelect = await postJson(tenantMain.url, "/sql", { sql: "SELECT 1 AS one" }, tenantOwner.token, { "x-tenant": db.name })
  if (tenantSelect.status !== 200) problems.push(`multi-tenant POST /sql SELECT 1: ${tenantSelect.status} ${JSON.stringify(tenantSelect.body)}`)
  return problems
}

/** No chat reply may stay pending once the fuzz is over (a reply runs on after its request ends). */
const checkNothingPending = async (): Promise<Array<string>> => {
  const deadline = Date.now() + 15_000
  for (;;) {
    const [row] = await admin("SELECT count(*)::int AS n FROM sys.messages WHERE status = 'pending'")
    const pending = Number(row!["n"])
    if (pending === 0) return []
    if (Date.now() > deadline) return [`${pending} chat messages still pending 15 s after the fuzz`]
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

const describeFailure = (outcome: Outcome): string => {
  const logs = serverLogs.of(outcome.requestId).map((log) => `    server ${log.service} ${log.level}: ${log.text}`)
  const { "content-type": type, ...headers } = outcome.request.headers
  const shownHeaders = Object.fromEntries(Object.entries(headers).map(([key, value]) => [key, value.length > 80 ? `${value.slice(0, 80)}…(${value.length})` : value]))
  return [
    `  ✗ ${outcome.problem} [${outcome.status ?? "-"}, ${outcome.ms.toFixed(0)} ms] kind=${outcome.request.kind}`,
    `    ${outcome.request.method} ${outcome.request.path.slice(0, 120)} content-type=${type ?? "(none)"} headers=${JSON.stringify(shownHeaders)}`,
    `    body ${preview(outcome.request.body)}`,
    `    answer ${JSON.stringify(outcome.response)}`,
    ...logs
  ].join("\n")
}

const fuzz = async (endpoint: Endpoint, index: number, runs = RUNS) => {
  const seed = SEED + index * 1_000_003
  const edges = endpoint.limitField === undefined
    ? []
    : bodiesAroundTheLimit(endpoint.limitField).map((body) =>
      requestOf("POST", endpointPathForLimit(endpoint), body, { authorization: `Bearer ${endpoint.name.includes("multi-tenant") ? tenantTokens.good : tokens.good}`, ...(endpoint.name.includes("multi-tenant") ? { "x-tenant": db.name } : {}) })
    )
  const errorsBefore = serverLogs.errors.length
  const tally = new Tally()
  const started = performance.now()
  await runConcurrently(edges, CONCURRENCY, async (request) => tally.add(await send(endpoint, request)))
  for (let chunk = 0; chunk * CHUNK < runs; chunk++) {
    const requests = fc.sample(endpoint.requests(), { seed: seed + chunk * 7_919, numRuns: Math.min(CHUNK, runs - chunk * CHUNK) })
    await runConcurrently(requests, CONCURRENCY, async (request) => tally.add(await send(endpoint, request)))
  }
  const seconds = (performance.now() - started) / 1000

  console.log([
    `${endpoint.name}: ${tally.sent} requests in ${seconds.toFixed(1)} s (seed ${seed}, slowest ${tally.slowest.toFixed(0)} ms, heap ${(process.memoryUsage().heapUsed / 2 ** 20).toFixed(0)} MiB)`,
    ...[...tally.statusesByKind].map(([kind, statuses]) => `  ${kind}: ${[...statuses].sort().map(([status, count]) => `${status}×${count}`).join(" ")}`)
  ].join("\n"))

  // Server errors not tied to a failed answer: a reply crashing after its response, a detached fiber...
  const strayErrors = serverLogs.errors.slice(errorsBefore)
    .filter((log) => !tally.failedIds.has(log.requestId))
    .map((log) => `  server ${log.service} ${log.level} (request ${log.requestId.startsWith("fuzz-") ? log.requestId : "none"}): ${log.text}`)
  const health = await checkHealthy()
  const pending = endpoint.service() === chat || endpoint.service() === tenantChat ? await checkNothingPending() : []

  const report = [
    ...(tally.failedIds.size > 0 ? [`${tally.failedIds.size} bad answers (seed ${seed}); the first ones:`, ...tally.failures.map(describeFailure)] : []),
    ...(strayErrors.length > 0 ? ["server errors:", ...strayErrors.slice(0, 12)] : []),
    ...(health.length > 0 ? ["unhealthy afterwards:", ...health] : []),
    ...pending
  ]
  expect(report.join("\n"), `${endpoint.name} (seed ${seed})`).toBe("")
  expect(tally.sent).toBe(runs + edges.length)
}

const endpointPathForLimit = (endpoint: Endpoint): string => {
  switch (endpoint.name) {
    case "POST /function/:name":
      return "/function/length"
    case "POST /conversations/:id/chat":
      return `/conversations/${conversations[0]}/chat`
    case "POST /conversations/:id/execute-tool":
      return `/conversations/${legacyConversation}/execute-tool`
    default:
      return endpoint.name.replace(/^POST /, "").replace(/ \(multi-tenant\)$/, "")
  }
}

// ---------------------------------------------------------------------------------------------
// The endpoints

const headers = (goodWeight: number, tenant = false) =>
  headersFor({
    authorization: authorization(tenant ? tenantTokens : tokens, goodWeight),
    appSchemas: ["fuzz_app"],
    tenants: tenant ? [db.name] : ["acme"],
    clientIpHeader: CLIENT_IP_HEADER
  })

const jsonEndpoint = (
  name: string,
  service: () => Service,
  fieldsOf: () => Record<string, fc.Arbitrary<string>>,
  options: { readonly authenticated: boolean; readonly structuredErrors?: boolean; readonly path?: () => fc.Arbitrary<string>; readonly valid?: fc.Arbitrary<string>; readonly tenant?: boolean }
): Endpoint => ({
  name,
  service,
  payload: true,
  structuredErrors: options.structuredErrors ?? false,
  // A getter: the fields may name things that exist only once beforeAll has run.
  get limitField() {
    return Object.keys(fieldsOf())[0] ?? "x"
  },
  requests: () => {
    const fields = fieldsOf()
    const valid = options.valid ??
      fc.tuple(...Object.entries(fields).map(([key, value]) => value.map((text) => `${jsonString(key)}:${text}`))).map((entries) => `{${entries.join(",")}}`)
    return fc.tuple(
        options.path?.() ?? fc.constant(name.replace(/^POST /, "").replace(/ \(multi-tenant\)$/, "")),
        bodyFor(valid, shapedObjectText(fields)),
        headers(options.authenticated ? 70 : 5, options.tenant ?? false)
    ).map(([path, body, headerValues]) => requestOf("POST", path, body, headerValues))
  }
})

const uuidLike = fc.uuid()
const garbageSegment = nastyString.map((text) => encodeURIComponent(text.replace(/[\ud800-\udfff]/g, "x")))

const conversationPath = (ids: () => ReadonlyArray<string>, suffix: string) =>
  fc.oneof(
    { arbitrary: fc.constantFrom(...ids()), weight: 10 },
    { arbitrary: uuidLike, weight: 2 },
    { arbitrary: fc.constant(foreignConversation), weight: 1 },
    { arbitrary: fc.constantFrom(...ids()).map((id) => id.toUpperCase()), weight: 1 },
    { arbitrary: garbageSegment, weight: 2 },
    { arbitrary: fc.constantFrom("", "%", "%zz", "..", "%2e%2e", "a%2Fb", "x".repeat(2_000), `{${ids()[0]}}`, `${ids()[0]}%00`, `${ids()[0]} `), weight: 1 }
  ).map((id) => `/conversations/${id}${suffix}`)

const modifiedArgs = fc.oneof(
  { arbitrary: fc.dictionary(fc.constantFrom("table_name", "columns", "rows", "values", "where", "sql", "slug", "title", "source", "steps", "view_name", "operations"), wrongValueText, { maxKeys: 5 }).map((entries) => `{${Object.entries(entries).map(([key, value]) => `${jsonString(key)}:${value}`).join(",")}}`), weight: 6 },
  { arbitrary: wrongValueText, weight: 3 },
  { arbitrary: fc.constant("null"), weight: 1 }
)

const ENDPOINTS: ReadonlyArray<Endpoint> = [
  jsonEndpoint("POST /auth/magic-link", () => main, () => ({
    email: plausibleEmail,
    challenge_token: fc.oneof(nastyString.map(jsonString), fc.constant(jsonString("x".repeat(2_049))))
  }), { authenticated: false }),
  jsonEndpoint("POST /auth/magic-link/verify", () => main, () => ({
    token: fc.oneof({ arbitrary: plausibleToken, weight: 9 }, { arbitrary: fc.constantFrom(...magicLinkTokens).map(jsonString), weight: 1 })
  }), { authenticated: false }),
  jsonEndpoint("POST /auth/set-password", () => main, () => ({ password: plausiblePassword }), { authenticated: true }),
  jsonEndpoint("POST /admin/invite", () => main, () => ({ email: plausibleEmail, role: plausibleRole }), { authenticated: true }),
  jsonEndpoint("POST /auth/login", () => main, () => ({
    email: plausibleEmail,
    password: plausiblePassword,
    challenge_token: nastyString.map(jsonString)
  }), { authenticated: false }),
  jsonEndpoint("POST /", () => main, () => ({}), { authenticated: true, path: () => fc.constant("/"), valid: fc.constantFrom("{}", "{ }", "{\"x\":1}") }),
  jsonEndpoint("POST /sql", () => main, () => ({ sql: plausibleSql, params: plausibleParams }), { authenticated: true, structuredErrors: true }),
  {
    name: "POST /function/:name",
    service: () => main,
    payload: true,
    structuredErrors: true,
    limitField: "x",
    requests: () => {
      const args = argumentsText(fc.oneof(scalarText, nastyString.map(jsonString)))
      return fc.tuple(functionPath, bodyFor(args, args), headers(70))
        .map(([path, body, headerValues]) => requestOf("POST", path, body, headerValues))
    }
  },
  jsonEndpoint("POST /conversations", () => chat, () => ({ title: plausibleTitle }), { authenticated: true }),
  jsonEndpoint("POST /conversations/:id/chat", () => chat, () => ({ content: plausibleContent }), {
    authenticated: true,
    path: () => conversationPath(() => conversations, "/chat")
  }),
  jsonEndpoint("POST /conversations/:id/execute-tool", () => chat, () => ({
    message_id: fc.oneof(
      { arbitrary: fc.constantFrom(...legacyMessages).map(jsonString), weight: 5 },
      { arbitrary: uuidLike.map(jsonString), weight: 2 },
      { arbitrary: nastyString.map(jsonString), weight: 2 }
    ),
    approved: fc.oneof(fc.constantFrom("true", "false"), scalarText),
    modified_args: modifiedArgs
  }), {
    authenticated: true,
    path: () => conversationPath(() => [legacyConversation, ...conversations.slice(0, 2)], "/execute-tool")
  }),
  {
    name: "POST /conversations/:id/continue",
    service: () => chat,
    payload: false,
    structuredErrors: false,
    limitField: undefined,
    requests: () =>
      fc.tuple(conversationPath(() => [...continuable, ...conversations.slice(0, 4)], "/continue"), bodyFor(anyJsonTextOrEmpty, anyJsonTextOrEmpty), headers(70))
        .map(([path, body, headerValues]) => requestOf("POST", path, body, headerValues))
  },
  {
    name: "GET /conversations/:id",
    service: () => chat,
    payload: false,
    structuredErrors: false,
    limitField: undefined,
    requests: () =>
      fc.tuple(conversationPath(() => [...conversations, legacyConversation], ""), headers(70))
        .map(([path, headerValues]) => requestOf("GET", path, { kind: "no-body", body: undefined, contentType: undefined }, headerValues))
  },
  {
    name: "GET /conversations",
    service: () => chat,
    payload: false,
    structuredErrors: false,
    limitField: undefined,
    requests: () =>
      fc.tuple(fc.constantFrom("/conversations", "/conversations/", "/conversations?limit=1", "/conversations?x=%zz"), headers(70))
        .map(([path, headerValues]) => requestOf("GET", path, { kind: "no-body", body: undefined, contentType: undefined }, headerValues))
  },
  {
    name: "DELETE /conversations/:id",
    service: () => chat,
    payload: false,
    structuredErrors: false,
    limitField: undefined,
    requests: () =>
      // Real ids only of conversations no other run needs (the fuzz deletes them).
      fc.tuple(conversationPath(() => [foreignConversation, ...continuable.slice(6)], ""), bodyFor(anyJsonTextOrEmpty, anyJsonTextOrEmpty), headers(70))
        .map(([path, body, headerValues]) => requestOf("DELETE", path, body, headerValues))
  },
  jsonEndpoint("POST /sql (multi-tenant)", () => tenantMain, () => ({ sql: plausibleSql, params: plausibleParams }), { authenticated: true, structuredErrors: true, tenant: true }),
  jsonEndpoint("POST /conversations (multi-tenant)", () => tenantChat, () => ({ title: plausibleTitle }), { authenticated: true, tenant: true })
]

// Declared after use in ENDPOINTS' closures (they run in the tests, after module evaluation).
const anyJsonTextOrEmpty: fc.Arbitrary<string> = fc.oneof(fc.constant("{}"), wrongValueText)

// ---------------------------------------------------------------------------------------------
// The runs

describe("fuzz: every JSON endpoint answers < 500 with {error}, never hangs, stays healthy", () => {
  beforeAll(() => {
    console.log(`fuzz seed ${SEED} (FUZZ_SEED), ${RUNS} requests per endpoint (FUZZ_RUNS)`)
  })
  ENDPOINTS.forEach((endpoint, index) => {
    const runs = endpoint.name.includes("multi-tenant") || endpoint.name === "GET /conversations" ? Math.ceil(RUNS / 2) : RUNS
    it(`${endpoint.name}: ${runs} random requests`, () => fuzz(endpoint, index, runs), TEST_TIMEOUT_MS)
  })
})

// ---------------------------------------------------------------------------------------------
// Bugs the fuzzer found, each pinned by the smallest request that showed it.

let regressionRequests = 0

/** Sends one request of a regression test; its id ties the server's log lines to it (printed after the tests). */
const raw = async (base: string, path: string, init: RequestInit) => {
  const requestId = `regression-${++regressionRequests}`
  const response = await fetch(`${base}${path}`, {
    ...init,
    headers: { ...(init.headers as Record<string, string>), "x-request-id": requestId },
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS)
  })
  const text = await response.text()
  console.log(`${init.method ?? "GET"} ${path} → ${response.status} ${response.headers.get("content-type")} ${JSON.stringify(text.slice(0, 200))}${
    serverLogs.of(requestId).map((log) => `\n  server ${log.service} ${log.level}: ${log.text}`).join("")
  }`)
  return { status: response.status, contentType: response.headers.get("content-type"), text }
}

/** What every 4xx/5xx answer must be: < 500, JSON, with an `error`. */
const expectClientError = (answer: { status: number; contentType: string | null; text: string }) => {
  expect(answer.status).toBeGreaterThanOrEqual(400)
  expect(answer.status).toBeLessThan(500)
  expect(answer.contentType).toContain("application/json")
  expect(JSON.parse(answer.text)).toHaveProperty("error")
}

const jsonPost = (base: string, path: string, body: string, token?: string, headers: Record<string, string> = {}) =>
  raw(base, path, {
    method: "POST",
    // A client address of its own: the magic-link limits must not answer first.
    headers: { "content-type": "application/json", [CLIENT_IP_HEADER]: randomUUID(), ...(token === undefined ? {} : { authorization: `Bearer ${token}` }), ...headers },
    body
  })

describe("bugs found by the fuzzer stay fixed", () => {
  it("POST /sql with a bind parameter nested 5,000 deep is a 400, not a 500 (JSON.stringify stack overflow)", async () => {
    expectClientError(await jsonPost(main.url, "/sql", `{"sql":"SELECT 1","params":[${"[".repeat(5_000)}${"]".repeat(5_000)}]}`, owner.token))
  })

  it("POST /function/:name with an argument nested 5,000 deep is a 400, not a 500 (same overflow)", async () => {
    expectClientError(await jsonPost(main.url, "/function/length", `[${"[".repeat(5_000)}${"]".repeat(5_000)}]`, owner.token))
  })

  it("POST /auth/magic-link with a NUL in the email is a 400, not a 500", async () => {
    expectClientError(await jsonPost(main.url, "/auth/magic-link", JSON.stringify({ email: "a\u0000@b" })))
  })

  it("POST /auth/magic-link/verify with a NUL in the token is a 4xx, not a 500", async () => {
    expectClientError(await jsonPost(main.url, "/auth/magic-link/verify", JSON.stringify({ token: "\u0000" })))
  })

  it("POST /auth/login with a NUL in the email is a 4xx, not a 500", async () => {
    expectClientError(await jsonPost(main.url, "/auth/login", JSON.stringify({ email: "\u0000", password: "" })))
  })

  it("POST /admin/invite with a NUL in the email is a 400, not a 500", async () => {
    expectClientError(await jsonPost(main.url, "/admin/invite", JSON.stringify({ email: "a\u0000@b", role: "staff" }), owner.token))
  })

  it("POST /auth/set-password with a NUL in the password is a 400, not a 500", async () => {
    const fresh = await verify(main.url, await inviteAsDatabaseAdmin(db, "fuzz-nul-password@plinth.test", "member"))
    expectClientError(await jsonPost(main.url, "/auth/set-password", JSON.stringify({ password: "\u0000".repeat(8) }), fresh.token))
  })

  it("POST /admin/invite of an address whose local part is over 200 characters invites it with a display name cut to 200, not a 500", async () => {
    const answer = await jsonPost(main.url, "/admin/invite", JSON.stringify({ email: `${"a".repeat(201)}@b`, role: "staff" }), owner.token)
    expect(answer.status).toBeLessThan(500)
  })

  it("POST /sql with fewer params than placeholders is a 400, not a 503 (08P01 is the caller's mistake)", async () => {
    const answer = await jsonPost(main.url, "/sql", JSON.stringify({ sql: "SELECT $1" }), owner.token)
    expect(answer.status).toBe(400)
  })

  it("POST /conversations with a NUL in the title is a 400, not a 500", async () => {
    expectClientError(await jsonPost(chat.url, "/conversations", JSON.stringify({ title: "\u0000" }), owner.token))
  })

  it("POST /conversations/:id/chat with a NUL in the content is a 400, not a 500 (jsonb refuses \\u0000)", async () => {
    const id = await createConversation(owner.token)
    expectClientError(await jsonPost(chat.url, `/conversations/${id}/chat`, JSON.stringify({ content: "\u0000" }), owner.token))
  })

  it("POST /conversations/:id/chat with a lone surrogate in the content is a 400, not a 500 (jsonb refuses \\ud800)", async () => {
    const id = await createConversation(owner.token)
    expectClientError(await jsonPost(chat.url, `/conversations/${id}/chat`, JSON.stringify({ content: "\ud800" }), owner.token))
  })

  it("POST /conversations with a valid token of a user that does not exist is a 4xx, not a 500 (foreign-key violation)", async () => {
    expectClientError(await jsonPost(chat.url, "/conversations", JSON.stringify({ title: "x" }), ghostToken))
  })

  /** A legacy tool call waiting for approval, in a conversation of its own. */
  const pendingToolCall = async () => {
    const conversation = await createConversation(owner.token)
    const [row] = await admin(
      "INSERT INTO sys.messages (conversation_id, role, content, status) VALUES ($1, 'assistant', $2::jsonb, 'pending_approval') RETURNING id::text AS id",
      [conversation, JSON.stringify({ type: "tool_call", tool_calls: [{ id: "toolu_bug", name: "propose_plan", args: { steps: ["a"] } }] })]
    )
    return { conversation, message: String(row!["id"]) }
  }

  it("POST /conversations/:id/execute-tool with a NUL in modified_args is a 4xx, not a 500 (jsonb refuses \\u0000)", async () => {
    const { conversation, message } = await pendingToolCall()
    expectClientError(await jsonPost(chat.url, `/conversations/${conversation}/execute-tool`, JSON.stringify({ message_id: message, modified_args: { steps: ["\u0000"] } }), owner.token))
  })

  it("POST /conversations/:id/execute-tool with modified_args nested 5,000 deep is a 4xx, not a 500 (JSON.stringify stack overflow)", async () => {
    const { conversation, message } = await pendingToolCall()
    const body = `{"message_id":"${message}","modified_args":{"steps":${"[".repeat(5_000)}${"]".repeat(5_000)}}}`
    expectClientError(await jsonPost(chat.url, `/conversations/${conversation}/execute-tool`, body, owner.token))
  })

  it("unknown X-Tenant names do not use up TENANT_MAX_LIVE: a registered tenant still answers after them", async () => {
    const service = await startLoggedService("main", "main (2 tenants)", db.mainUrl, { NODE_ENV: "test", MULTI_TENANT: "true", TENANT_MAX_LIVE: "2" })
    try {
      const select = (tenant: string) => jsonPost(service.url, "/sql", JSON.stringify({ sql: "SELECT 1" }), tenantOwner.token, { "x-tenant": tenant })
      expect((await select("nope_one")).status).toBe(404)
      expect((await select("nope_two")).status).toBe(404)
      // Still an unlisted name: 404, not "too many active tenants".
      expect((await select("nope_three")).status).toBe(404)
      expect((await select(db.name)).status).toBe(200)
    } finally {
      await service.close()
    }
  })

  it("a body with a content type other than JSON is a 415 with a JSON {error}, not text/plain", async () => {
    expectClientError(await raw(main.url, "/sql", {
      method: "POST",
      headers: { "content-type": "text/plain", authorization: `Bearer ${owner.token}` },
      body: "{\"sql\":\"SELECT 1\"}"
    }))
  })

  it("request headers over 16 KiB are a 431 with a JSON {error}, not an empty answer", async () => {
    expectClientError(await raw(main.url, "/sql", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${"x".repeat(17_000)}` },
      body: "{\"sql\":\"SELECT 1\"}"
    }))
  })
})
