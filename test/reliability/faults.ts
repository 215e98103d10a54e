/**
 * What the database-fault tests stand on: a PostgreSQL of their own (not the suite's shared one)
 * that a test can stop and start again on the same data directory and port, a load generator
 * that records every request, and a raw SSE reader.
 */
import { Cause, Effect, Exit, Logger, Scope } from "effect"
import { SqlClient } from "effect/sql"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { ensureDatabase, loginUrl, migrateDatabase, setLoginPasswords, withDatabase } from "../../src/layers/Database.ts"
import { startEmbeddedPostgres } from "../../src/layers/EmbeddedPostgres.ts"
import { freePort } from "../support/ports.ts"
import { serveInProcess } from "../support/services.ts"

const DATABASE = "plinth_faults"

export interface StoppablePostgres {
  readonly port: number
  /** Superuser URL of the test database. */
  readonly adminUrl: string
  /** As `authenticator` (the main service). */
  readonly mainUrl: string
  readonly isRunning: () => boolean
  /** Stops the server (fast shutdown) and resolves once the process has exited. */
  readonly stop: () => Promise<void>
  /** Starts it again on the same data directory and port; resolves once it accepts connections. */
  readonly start: () => Promise<void>
  /**
   * Freezes the postmaster and every backend (SIGSTOP): the server stops answering but no
   * connection closes, as when its host hangs or the network drops packets.
   */
  readonly freeze: () => Promise<void>
  /** Lets a frozen server run again (SIGCONT). */
  readonly thaw: () => void
  /** Stops the server (if running) and removes its folder. */
  readonly destroy: () => Promise<void>
  /** The server's own log lines (FATAL, LOG, …), newest last. */
  readonly log: () => ReadonlyArray<string>
}

export const startStoppablePostgres = async (): Promise<StoppablePostgres> => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "plinth-faults-"))
  // mkdtemp makes it 0700; PostgreSQL runs as its own OS user and must pass through.
  await fs.chmod(dir, 0o711)
  const port = await freePort()
  const superuserPassword = randomBytes(16).toString("hex")
  const lines: Array<string> = []
  const options = {
    pgData: path.join(dir, "pg"),
    port,
    superuserPassword,
    onLog: (text: string) => {
      for (const line of text.split("\n")) if (line.trim() !== "") lines.push(line)
      if (lines.length > 2_000) lines.splice(0, lines.length - 2_000)
    }
  }
  let scope: Scope.Closeable | undefined
  const start = async () => {
    if (scope !== undefined) throw new Error("PostgreSQL is already running")
    const fresh = Effect.runSync(Scope.make())
    try {
      const server = await Effect.runPromise(Scope.provide(fresh)(startEmbeddedPostgres(options)))
      if (server.port !== port) throw new Error(`PostgreSQL came up on ${server.port}, not ${port}`)
    } catch (error) {
      await Effect.runPromise(Scope.close(fresh, Exit.void))
      throw error
    }
    scope = fresh
  }
  const stop = async () => {
    const running = scope
    scope = undefined
    if (running !== undefined) await Effect.runPromise(Scope.close(running, Exit.void))
  }
  let frozen: Array<number> = []
  const thaw = () => {
    for (const pid of frozen) {
      try {
        process.kill(pid, "SIGCONT")
      } catch {
        // gone already
      }
    }
    frozen = []
  }
  const freeze = async () => {
    const postmaster = Number((await fs.readFile(path.join(options.pgData, "postmaster.pid"), "utf8")).split("\n")[0])
    if (!Number.isInteger(postmaster) || postmaster <= 0) throw new Error("no postmaster.pid")
    // The postmaster first, so that it forks no new backend while we look for its children.
    process.kill(postmaster, "SIGSTOP")
    frozen.push(postmaster)
    for (const pid of await childrenOf(postmaster)) {
      process.kill(pid, "SIGSTOP")
      frozen.push(pid)
    }
  }
  await start()
  try {
    const serverUrl = `postgres://postgres:${superuserPassword}@127.0.0.1:${port}/postgres`
    const adminUrl = `postgres://postgres:${superuserPassword}@127.0.0.1:${port}/${DATABASE}`
    const passwords = { authenticator: randomBytes(24).toString("hex"), chat_authenticator: randomBytes(24).toString("hex") }
    await Effect.runPromise(Effect.gen(function*() {
      yield* ensureDatabase(serverUrl, DATABASE)
      yield* migrateDatabase(adminUrl)
      yield* setLoginPasswords(adminUrl, passwords)
    }))
    return {
      port,
      adminUrl,
      mainUrl: loginUrl(port, "authenticator", passwords.authenticator, DATABASE),
      isRunning: () => scope !== undefined,
      stop,
      start,
      freeze,
      thaw,
      destroy: async () => {
        thaw()
        await stop()
        await fs.rm(dir, { recursive: true, force: true })
      },
      log: () => lines
    }
  } catch (error) {
    await stop()
    await fs.rm(dir, { recursive: true, force: true })
    throw error
  }
}

export interface LoggedLine {
  readonly at: number
  readonly level: string
  readonly message: string
  /** The cause logged with the line, pretty-printed (empty when none). */
  readonly cause: string
}

export interface MainService {
  readonly url: string
  readonly logs: ReadonlyArray<LoggedLine>
  readonly close: () => Promise<void>
}

/**
 * The main service in this process, as test/support/services.ts starts it, but keeping the
 * cause of each log line (which request failed, and why).
 */
export const startMainService = async (databaseUrl: string, env: Record<string, string>): Promise<MainService> => {
  const logs: Array<LoggedLine> = []
  const logger = Logger.make(({ cause, logLevel, message }) => {
    logs.push({
      at: clock(),
      level: logLevel,
      message: (Array.isArray(message) ? message : [message]).map(String).join(" "),
      cause: cause.reasons.length === 0 ? "" : Cause.pretty(cause)
    })
  })
  return { ...(await serveInProcess("main", "main", databaseUrl, env, Logger.layer([logger]))), logs }
}

/** The processes whose parent is `parent` (from /proc). */
const childrenOf = async (parent: number): Promise<Array<number>> => {
  const children: Array<number> = []
  for (const entry of await fs.readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    const stat = await fs.readFile(`/proc/${entry}/stat`, "utf8").catch(() => "")
    // pid (comm) state ppid …; comm may hold spaces and parentheses, so read after the last ')'.
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
    if (ppid === parent) children.push(Number(entry))
  }
  return children
}

/** Runs `run` with a short-lived superuser SqlClient. */
export const adminQuery = <A, E>(url: string, run: (sql: SqlClient.SqlClient) => Effect.Effect<A, E>) =>
  Effect.runPromise(withDatabase(url, Effect.gen(function*() {
    return yield* run(yield* SqlClient.SqlClient)
  })))

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

// -----------------------------------------------------------------------------------------------
// HTTP

export interface Sample {
  /** ms since the clock's origin (see `clock`). */
  readonly start: number
  readonly end: number
  /** HTTP status, or 0 when the request failed or timed out without a response. */
  readonly status: number
  /** `plain` = `{error: string}`, `database` = `{error: {message, code, …}}`, `ok`, or what else came. */
  readonly body: "ok" | "plain" | "database" | "other" | "none"
  readonly code?: string
  readonly text: string
}

export const clock = (() => {
  const origin = performance.now()
  return () => performance.now() - origin
})()

const classify = (status: number, text: string): Pick<Sample, "body" | "code"> => {
  if (status === 0) return { body: "none" }
  try {
    const json = JSON.parse(text) as { error?: unknown; rows?: unknown }
    if (status === 200 && json.rows !== undefined) return { body: "ok" }
    if (typeof json.error === "string") return { body: "plain" }
    if (typeof json.error === "object" && json.error !== null && typeof (json.error as { message?: unknown }).message === "string") {
      const code = (json.error as { code?: unknown }).code
      return typeof code === "string" ? { body: "database", code } : { body: "database" }
    }
    return status === 200 ? { body: "ok" } : { body: "other" }
  } catch {
    return { body: "other" }
  }
}

/** One request, timed; never throws (a transport failure or a timeout is status 0). */
export const timedRequest = async (
  url: string,
  init: { readonly method: string; readonly body?: unknown; readonly token?: string; readonly headers?: Record<string, string> },
  timeoutMs: number
): Promise<Sample> => {
  const start = clock()
  try {
    const response = await fetch(url, {
      method: init.method,
      headers: {
        ...(init.body === undefined ? {} : { "content-type": "application/json" }),
        ...(init.token === undefined ? {} : { authorization: `Bearer ${init.token}` }),
        ...init.headers
      },
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
      signal: AbortSignal.timeout(timeoutMs)
    })
    const text = await response.text()
    return { start, end: clock(), status: response.status, ...classify(response.status, text), text: text.slice(0, 300) }
  } catch (error) {
    return { start, end: clock(), status: 0, body: "none", text: String(error).slice(0, 300) }
  }
}

export interface Load {
  readonly samples: Array<Sample>
  /** Stops issuing requests and resolves when the last one in flight has finished. */
  readonly stop: () => Promise<void>
}

/** `concurrency` workers each sending `request` back to back (with `pauseMs` between). */
export const startLoad = (request: () => Promise<Sample>, concurrency: number, pauseMs: number): Load => {
  const samples: Array<Sample> = []
  let running = true
  const worker = async () => {
    while (running) {
      samples.push(await request())
      if (pauseMs > 0) await sleep(pauseMs)
    }
  }
  const workers = Array.from({ length: concurrency }, worker)
  return {
    samples,
    stop: async () => {
      running = false
      await Promise.all(workers)
    }
  }
}

// -----------------------------------------------------------------------------------------------
// SSE

export interface RawStream {
  readonly text: () => string
  readonly status: () => number
  /** When the stream ended (ms on `clock`), if it has. */
  readonly endedAt: () => number | undefined
  /** When `pattern` first matched (ms on `clock`); rejects after `timeoutMs` or when the stream ends first. */
  readonly waitFor: (pattern: RegExp, timeoutMs: number) => Promise<number>
  readonly close: () => void
}

/** A raw SSE reader over node:http (no reconnection: what the server does is what we see). */
export const openRawStream = (url: string, token: string): RawStream => {
  let text = ""
  let statusCode = 0
  let endedAt: number | undefined
  const listeners = new Set<() => void>()
  const notify = () => {
    for (const listener of listeners) listener()
  }
  const request = http.get(url, { headers: { authorization: `Bearer ${token}` }, agent: false }, (response) => {
    statusCode = response.statusCode ?? 0
    response.setEncoding("utf8")
    response.on("data", (chunk: string) => {
      text += chunk
      notify()
    })
  })
  request.on("error", () => undefined)
  request.on("close", () => {
    endedAt ??= clock()
    notify()
  })
  const waitFor = (pattern: RegExp, timeoutMs: number) =>
    new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => {
        listeners.delete(check)
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${pattern}; got: ${JSON.stringify(text.slice(-500))}`))
      }, timeoutMs)
      function check() {
        if (pattern.test(text)) {
          clearTimeout(timer)
          listeners.delete(check)
          resolve(clock())
        } else if (endedAt !== undefined) {
          clearTimeout(timer)
          listeners.delete(check)
          reject(new Error(`the stream ended before ${pattern}; got: ${JSON.stringify(text.slice(-500))}`))
        }
      }
      listeners.add(check)
      check()
    })
  return { text: () => text, status: () => statusCode, endedAt: () => endedAt, waitFor, close: () => request.destroy() }
}
