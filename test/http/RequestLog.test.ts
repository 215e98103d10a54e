/**
 * The request log's lines and batches: the production line has the fields, level and timestamp
 * Effect's JSON logger gives a request line (parsed), the development line is the readable
 * logger's shape, and many requests make fewer writes than lines, each line there once and in order.
 */
import { Context, Effect, Exit, Layer, Logger, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { BATCH_CHARS, BATCH_MS, batchedLines, jsonLine, jsonRequestLog, readableLine, RequestLog } from "../../src/http/RequestLog.ts"
import { requestLogTo } from "../../src/layers/Logging.ts"
import { maskEmails } from "../../src/services/EmailMask.ts"
import { PlinthConfig } from "../../src/services/PlinthConfig.ts"
import { createTestDatabase, type TestDatabase } from "../support/database.ts"
import { eventually } from "../support/eventually.ts"
import { serveInProcess, startService, testEnv } from "../support/services.ts"

/** What the production logger wrote for a request line before: `Effect.logInfo` annotated with the fields, as JSON. */
const effectJsonLine = (method: string, path: string, status: number, duration: string, requestId: string) => {
  const written: Array<string> = []
  const logger = Logger.map(Logger.formatJson, (line) => written.push(line))
  Effect.runSync(Effect.logInfo(`${method} ${path} ${status} ${duration}`).pipe(
    Effect.annotateLogs({ method, path, status, duration, requestId }),
    Effect.provide(Logger.layer([logger]))
  ))
  return written[0]!
}

/** A sink that keeps each write. */
const recordingSink = () => {
  const writes: Array<string> = []
  return { writes, write: (chunk: string) => writes.push(chunk), lines: () => writes.join("").split("\n").filter((line) => line !== "") }
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve))
/** Past the end of a batch started now. */
const batchEnded = () => new Promise((resolve) => setTimeout(resolve, BATCH_MS + 5))

describe("the production line", () => {
  it("parses, and has the fields, order, level and timestamp of Effect's JSON logger's request line", () => {
    const ours = JSON.parse(jsonLine("POST", "/sql", 200, "1.3ms", "req-1", 42, Date.now())) as Record<string, unknown>
    const effects = JSON.parse(effectJsonLine("POST", "/sql", 200, "1.3ms", "req-1")) as Record<string, unknown>
    expect(Object.keys(ours)).toEqual(Object.keys(effects))
    expect(Object.keys(ours["annotations"] as object)).toEqual(Object.keys(effects["annotations"] as object))
    expect({ ...ours, timestamp: "", fiberId: "" }).toEqual({ ...effects, timestamp: "", fiberId: "" })
    expect(ours["level"]).toBe("INFO")
    expect(ours["message"]).toBe("POST /sql 200 1.3ms")
    expect(ours["annotations"]).toEqual({ method: "POST", path: "/sql", status: 200, duration: "1.3ms", requestId: "req-1" })
    expect(new Date(ours["timestamp"] as string).toISOString()).toBe(ours["timestamp"])
    expect(ours["fiberId"]).toBe("#42")
  })

  it("masks an email address in the path, and escapes what JSON must", () => {
    const path = "/data/jane.doe@example.com/\"x\\"
    const line = jsonLine("GET", path, 404, "0.2ms", "req-2", 1, Date.now())
    expect(line.endsWith("}\n")).toBe(true)
    const entry = JSON.parse(line) as { message: string; annotations: { path: string } }
    // As the production logger masks a whole line (src/services/EmailMask.ts).
    expect(entry.annotations.path).toBe(maskEmails(path))
    expect(entry.annotations.path).toContain("***@example.com/\"x\\")
    expect(entry.message).toBe(`GET ${maskEmails(path)} 404 0.2ms`)
    expect(line).not.toContain("jane.doe")
  })

  it.each(["/plain", "/quote\"back\\slash", "/tab\tnewline\n", "/caf\u00e9/\u{1F600}", "/lone\ud800surrogate", "/\u0000\u001f"])("path %j: parses back to itself", (path) => {
    const entry = JSON.parse(jsonLine("GET", path, 200, "0.1ms", "id", 1, Date.now())) as { message: string; annotations: { path: string } }
    expect(entry.annotations.path).toBe(path)
    expect(entry.message).toBe(`GET ${path} 200 0.1ms`)
  })
})

describe("the development line", () => {
  it("is the readable logger's Info line: time of day, level, message", () => {
    const line = readableLine("GET", "/health", 200, "0.4ms", Date.parse("2026-01-02T03:04:05.678Z"))
    expect(line).toBe("03:04:05.678 INFO  GET /health 200 0.4ms\n")
  })
})

describe("batches", () => {
  it("lines added within a batch's time are one write when it ends, in order", async () => {
    const sink = recordingSink()
    const lines = batchedLines(sink)
    for (let i = 0; i < 10; i++) lines.add(`line ${i}\n`)
    await nextTurn()
    for (let i = 10; i < 20; i++) lines.add(`line ${i}\n`)
    expect(sink.writes).toHaveLength(0)
    await batchEnded()
    expect(sink.writes).toHaveLength(1)
    expect(sink.lines()).toEqual(Array.from({ length: 20 }, (_, i) => `line ${i}`))
  })

  it("a batch of BATCH_CHARS is written without waiting for its time", () => {
    const sink = recordingSink()
    const lines = batchedLines(sink)
    const line = `${"x".repeat(199)}\n`
    const count = Math.ceil((3 * BATCH_CHARS) / line.length)
    for (let i = 0; i < count; i++) lines.add(line)
    expect(sink.writes.length).toBeGreaterThanOrEqual(2)
    lines.flush()
    expect(sink.lines()).toHaveLength(count)
  })

  it("flush writes what waits at once, and a flushed batch is not written again", async () => {
    const sink = recordingSink()
    const lines = batchedLines(sink)
    lines.add("a\n")
    lines.flush()
    expect(sink.writes).toEqual(["a\n"])
    await nextTurn()
    expect(sink.writes).toEqual(["a\n"])
  })
})

describe("the process's request log (requestLogTo, in LoggingLive)", () => {
  /** The layer built on `env` writing to recording streams; `log` logs one line, `close` closes the layer. */
  const build = (env: Record<string, string>) => {
    const stdout = recordingSink()
    const stderr = recordingSink()
    const scope = Effect.runSync(Scope.make())
    const context = Effect.runSync(Layer.buildWithScope(
      requestLogTo({ stdout, stderr }).pipe(Layer.provide(PlinthConfig.layer), Layer.provide(testEnv(env))),
      scope
    ))
    const requestLog = Context.get(context, RequestLog)
    return {
      stdout,
      stderr,
      log: (id: string) => Effect.runSync(requestLog.log("GET", "/health", 200, "0.1ms", id)),
      close: () => Effect.runSync(Scope.close(scope, Exit.void))
    }
  }

  it("what waits is written when the layer closes, in the same turn (shutdown loses no line)", () => {
    const built = build({ NODE_ENV: "production" })
    built.log("closing-1")
    built.log("closing-2")
    expect(built.stdout.writes).toEqual([])
    built.close()
    expect(built.stdout.writes).toHaveLength(1)
    expect(built.stdout.lines().map((line) => (JSON.parse(line) as { annotations: { requestId: string } }).annotations.requestId)).toEqual(["closing-1", "closing-2"])
  })

  it("production writes JSON to stdout, development readable lines to stderr", async () => {
    const production = build({ NODE_ENV: "production" })
    const development = build({ NODE_ENV: "development" })
    production.log("p")
    development.log("d")
    await batchEnded()
    expect(production.stdout.lines().map((line) => JSON.parse(line) as { message: string })).toMatchObject([{ message: "GET /health 200 0.1ms" }])
    expect(development.stderr.lines()).toEqual([expect.stringMatching(/^\d\d:\d\d:\d\d\.\d{3} INFO  GET \/health 200 0\.1ms$/)])
    expect([...production.stderr.writes, ...development.stdout.writes]).toEqual([])
    production.close()
    development.close()
  })

  it.each([{ LOG_REQUESTS: "false" }, { LOG_LEVEL: "Warn" }, { LOG_LEVEL: "none" }])("%o: no line", async (env) => {
    const built = build({ NODE_ENV: "production", ...env })
    built.log("off")
    await nextTurn()
    built.close()
    expect([...built.stdout.writes, ...built.stderr.writes]).toEqual([])
  })
})

describe("a service writing through the batched log", () => {
  let db: TestDatabase
  let service: { readonly url: string; readonly close: () => Promise<void> }
  const sink = recordingSink()
  beforeAll(async () => {
    db = await createTestDatabase()
    const requestLog = Layer.succeed(RequestLog, jsonRequestLog(batchedLines(sink)))
    service = await serveInProcess("main", "main", db.mainUrl, {}, Layer.merge(Logger.layer([]), requestLog))
  })
  afterAll(async () => {
    await service?.close()
    await db?.drop()
  })

  const idsOf = (lines: ReadonlyArray<string>) =>
    lines.map((line) => (JSON.parse(line) as { annotations: { requestId: string } }).annotations.requestId)

  it("many requests: fewer writes than lines, every line there once", async () => {
    const ids = Array.from({ length: 200 }, (_, i) => `many-${i}`)
    for (let at = 0; at < ids.length; at += 50) {
      await Promise.all(ids.slice(at, at + 50).map((id) => fetch(`${service.url}/health`, { headers: { "x-request-id": id } }).then((r) => r.text())))
    }
    const ours = () => idsOf(sink.lines()).filter((id) => id.startsWith("many-"))
    expect(await eventually(async () => ours().length >= ids.length)).toBe(true)
    expect([...ours()].sort()).toEqual([...ids].sort())
    expect(sink.writes.length).toBeLessThan(sink.lines().length)
  })

  it("requests one after another: their lines in the same order", async () => {
    const ids = Array.from({ length: 30 }, (_, i) => `seq-${String(i).padStart(2, "0")}`)
    for (const id of ids) await (await fetch(`${service.url}/nope?x=1`, { headers: { "x-request-id": id } })).text()
    const ours = () => idsOf(sink.lines()).filter((id) => id.startsWith("seq-"))
    expect(await eventually(async () => ours().length >= ids.length)).toBe(true)
    expect(ours()).toEqual(ids)
    const last = JSON.parse(sink.lines().at(-1)!) as { message: string; annotations: Record<string, unknown> }
    expect(last.message).toMatch(/^GET \/nope 404 \d+\.\dms$/)
    expect(last.annotations).toMatchObject({ method: "GET", path: "/nope", status: 404, requestId: "seq-29" })
  })
})

describe("a service without the batched log (tests, the bench's own)", () => {
  let db: TestDatabase
  beforeAll(async () => {
    db = await createTestDatabase()
  })
  afterAll(() => db?.drop())

  it("logs request lines through Effect's logger, and none with LOG_REQUESTS=false", async () => {
    const logged = await startService("main", db.mainUrl)
    const quiet = await startService("main", db.mainUrl, { LOG_REQUESTS: "false" })
    try {
      await get(logged.url, "through-effect")
      await get(quiet.url, "quiet")
      expect(await eventually(async () => logged.logs.some((entry) => entry.annotations["requestId"] === "through-effect"))).toBe(true)
      // The quiet service answered after the logged one's line landed, so its own would have by now.
      await get(quiet.url, "quiet-2")
      await nextTurn()
      expect(quiet.logs.filter((entry) => entry.annotations["requestId"] !== undefined && entry.level === "Info")).toEqual([])
    } finally {
      await logged.close()
      await quiet.close()
    }
  })
})

const get = (base: string, requestId: string) => fetch(`${base}/health`, { headers: { "x-request-id": requestId } }).then((response) => response.text())
