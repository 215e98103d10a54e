/**
 * What every benchmark stands on: its own embedded PostgreSQL in a temporary folder, migrated,
 * and the main service in this process on an ephemeral port, wired exactly as in production.
 */
import { PgClient } from "@effect/sql-pg"
import { ConfigProvider, Context, Effect, Exit, Layer, Logger, ManagedRuntime, Redacted, Scope } from "effect"
import { HttpServer } from "effect/http"
import { SqlClient } from "effect/sql"
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import { readFileSync, rmSync, writeFileSync } from "node:fs"
import * as fs from "node:fs/promises"
import type * as http from "node:http"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { ensureDatabase, loginUrl, migrateDatabase, setLoginPasswords } from "../src/layers/Database.ts"
import { startEmbeddedPostgres } from "../src/layers/EmbeddedPostgres.ts"
import { chatService, mainService } from "../src/layers/Services.ts"
import { PageChecker } from "../src/services/PageChecker.ts"
import { PlinthConfig } from "../src/services/PlinthConfig.ts"
import { type RequestContext, SETTINGS_STATEMENT, settingsOf } from "../src/services/RequestContext.ts"
import type { Histogram } from "./stats.ts"

export const freePort = () =>
  new Promise<number>((resolve) => {
    const server = net.createServer().listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

/** What the bench's services sign their JWTs with. */
export const BENCH_JWT_SECRET = "bench-secret-0123456789abcdef0123456789"

export interface BenchStack {
  readonly adminUrl: string
  readonly mainUrl: string
  readonly baseUrl: string
  /** The chat service's base URL, when started with `{ chat: true }`. */
  readonly chatUrl: string
  /** Runs `run` as the administrator, on connections kept open (a change timed from its SQL is not timed from a new login). */
  readonly admin: <A, E>(run: (sql: SqlClient.SqlClient) => Effect.Effect<A, E>) => Promise<A>
  readonly close: () => Promise<void>
}

const addressOf = (context: Context.Context<HttpServer.HttpServer>) => {
  const address = Context.get(context, HttpServer.HttpServer).address
  return `http://127.0.0.1:${address._tag === "UnixPathAddress" ? 0 : address.port}`
}

/** What a bench stopped by a signal must stop first (latest first), since its own `finally` will not run. */
const onStop: Array<() => Promise<void>> = []
const stopAndExit = (signal: NodeJS.Signals) => {
  if (onStop.length === 0) process.exit(128 + (os.constants.signals[signal] ?? 0))
  const stopping = onStop.splice(0).reverse()
  void stopping.reduce((done, stop) => done.then(stop, stop), Promise.resolve()).finally(() => process.exit(128 + (os.constants.signals[signal] ?? 0)))
}

/** Runs `stop` if the bench is stopped by SIGINT, SIGTERM or SIGHUP; the returned function forgets it (once it stopped normally). */
export const stopOnSignal = (stop: () => Promise<void>): (() => void) => {
  if (process.listenerCount("SIGTERM") === 0) for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.once(signal, stopAndExit)
  onStop.push(stop)
  return () => {
    const at = onStop.indexOf(stop)
    if (at >= 0) onStop.splice(at, 1)
  }
}

/**
 * A bench killed outright (SIGKILL) runs no code, and its PostgreSQL, in a process group of its
 * own, would stay: a shell of its own waits for this process to go, then stops the server (if it
 * still runs on `dir`) and removes `dir`.
 */
const stopPostgresWithBench = (dir: string) => {
  const pgData = path.join(dir, "pg")
  const pid = Number(readFileSync(path.join(pgData, "postmaster.pid"), "utf8").split("\n")[0])
  const script = `while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done; ` +
    `if grep -q -- "$1" /proc/${pid}/cmdline 2>/dev/null; then kill -INT ${pid}; while kill -0 ${pid} 2>/dev/null; do sleep 1; done; fi; rm -rf -- "$2"`
  spawn("sh", ["-c", script, "sh", pgData, dir], { detached: true, stdio: "ignore" }).unref()
}

export const startBenchStack = async (
  extraEnv: Record<string, string> = {},
  /** `settings`: PostgreSQL server settings besides Plinth's own (startEmbeddedPostgres). */
  options: { readonly chat?: boolean; readonly settings?: Readonly<Record<string, string>> } = {}
): Promise<BenchStack> => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "plinth-bench-"))
  await fs.chmod(dir, 0o711)
  const scope = Effect.runSync(Scope.make())
  const passwords = { authenticator: randomBytes(24).toString("hex"), chat_authenticator: randomBytes(24).toString("hex") }
  const server = await Effect.runPromise(Scope.provide(scope)(startEmbeddedPostgres({
    pgData: path.join(dir, "pg"),
    port: await freePort(),
    superuserPassword: randomBytes(16).toString("hex"),
    ...(options.settings === undefined ? {} : { settings: options.settings })
  })))
  stopPostgresWithBench(dir)
  const forget = stopOnSignal(() => Effect.runPromise(Scope.close(scope, Exit.void)))
  await Effect.runPromise(ensureDatabase(server.adminUrl(), "bench"))
  const adminUrl = server.adminUrl("bench")
  // Silent: a scenario's stdout is its table for docs/benchmarks.md.
  await Effect.runPromise(migrateDatabase(adminUrl).pipe(Effect.provide(Logger.layer([]))))
  await Effect.runPromise(setLoginPasswords(adminUrl, passwords))
  const mainUrl = loginUrl(server.port, "authenticator", passwords.authenticator, "bench")
  const env = { NODE_ENV: "test", JWT_SECRET: BENCH_JWT_SECRET, LOG_LEVEL: "Warn", ...extraEnv }
  const serve = <E>(service: Layer.Layer<HttpServer.HttpServer, E, PlinthConfig | PageChecker>) =>
    Effect.runPromise(Layer.buildWithScope(
      service.pipe(
        Layer.provide(PageChecker.layer),
        Layer.provide(PlinthConfig.layer),
        Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env }))),
        Layer.provide(Logger.layer([]))
      ),
      scope
    )).then(addressOf)
  const baseUrl = await serve(mainService({ host: "127.0.0.1", port: 0, name: "main" }, mainUrl))
  const chatUrl = options.chat === true
    ? await serve(chatService({ host: "127.0.0.1", port: 0, name: "chat" }, loginUrl(server.port, "chat_authenticator", passwords.chat_authenticator, "bench")))
    : ""
  const adminDb = ManagedRuntime.make(PgClient.layer({ url: Redacted.make(adminUrl), maxConnections: 2 }))
  return {
    adminUrl,
    mainUrl,
    baseUrl,
    chatUrl,
    admin: (run) => adminDb.runPromise(Effect.gen(function*() {
      return yield* run(yield* SqlClient.SqlClient)
    })),
    close: async () => {
      forget()
      await adminDb.dispose()
      await Effect.runPromise(Scope.close(scope, Exit.void))
      await fs.rm(dir, { recursive: true, force: true })
    }
  }
}

/** A signed-in user of `role`: invited as a database administrator, then the link verified. */
export const signIn = async (stack: BenchStack, email: string, role: string): Promise<string> => {
  const [row] = await stack.admin((sql) => sql<{ token: string }>`SELECT sys.invite_user(${email}, ${role}) AS token`)
  const response = await fetch(`${stack.baseUrl}/auth/magic-link/verify`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ token: row!.token })
  })
  return ((await response.json()) as { token: string }).token
}

/** The built command (`npm run build`), as users run it. */
export const BUILT_CLI = "dist/src/cli/main.js"

/** `npm run build`: the bench measures the code users run, not a dist/ left from another commit. */
export const buildPlinth = () => {
  const built = spawnSync("npm", ["run", "--silent", "build"], { stdio: ["ignore", "ignore", "inherit"] })
  if (built.status !== 0) throw new Error(`npm run build failed (exit ${built.status})`)
}

/** A `plinth serve main` process of its own, from the built code. */
export interface ServedPlinth {
  readonly url: string
  /** Its CPU time so far (user + system, every thread), in µs, from /proc/<pid>/stat. */
  readonly cpuMicros: () => number
  /** Lines it wrote to stdout so far (its request log in production). */
  readonly lines: () => number
  readonly close: () => Promise<void>
}

const TICKS_PER_SECOND = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100

/** utime + stime of `pid` in µs (/proc/<pid>/stat fields 14 and 15, in clock ticks). */
export const processCpuMicros = (pid: number): number => {
  const text = readFileSync(`/proc/${pid}/stat`, "utf8")
  // pid (comm) state ...: comm may hold spaces, so count fields after its closing parenthesis.
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ")
  return ((Number(fields[11]) + Number(fields[12])) * 1_000_000) / TICKS_PER_SECOND
}

const exitOf = (child: ChildProcess) =>
  child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise<void>((resolve) => child.once("exit", () => resolve()))

/**
 * `plinth serve main` as users run it: the built command with the node flags of its `#!` line,
 * NODE_ENV=production and otherwise the defaults (request log on), configured from the
 * environment for the bench's database (DATABASE_ADMIN_URL too, so it migrates first, as a
 * deployment with URLs does). Its stdout is a pipe this process reads and drops, as a log
 * collector would. Stopped with the bench, also when a signal stops the bench; a bench killed
 * outright leaves no Plinth either (Plinth stops when its parent goes).
 */
export const startServedPlinth = async (
  stack: BenchStack,
  extraEnv: Record<string, string> = {},
  /** More node flags, after those of the `#!` line (`--cpu-prof` to profile it). */
  extraNodeFlags: ReadonlyArray<string> = []
): Promise<ServedPlinth> => {
  const flags = readFileSync(BUILT_CLI, "utf8").split("\n")[0]!.split(" ").slice(3)
  const port = await freePort()
  const child = spawn(process.execPath, [...flags, ...extraNodeFlags, BUILT_CLI, "serve", "main"], {
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "/tmp",
      NODE_ENV: "production",
      JWT_SECRET: BENCH_JWT_SECRET,
      DATABASE_URL: stack.mainUrl,
      DATABASE_ADMIN_URL: stack.adminUrl,
      HOST: "127.0.0.1",
      PORT: String(port),
      ...extraEnv
    },
    stdio: ["ignore", "pipe", "pipe"]
  })
  const close = async () => {
    forget()
    if (child.exitCode !== null || child.signalCode !== null) return
    const killer = setTimeout(() => child.kill("SIGKILL"), 10_000)
    child.kill("SIGTERM")
    await exitOf(child)
    clearTimeout(killer)
  }
  const forget = stopOnSignal(close)
  let lines = 0
  let head = ""
  let errors = ""
  child.stdout!.on("data", (chunk: Buffer) => {
    if (head.length < 4096) head += chunk.toString("utf8")
    for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, at + 1)) lines++
  })
  child.stderr!.on("data", (chunk: Buffer) => (errors = (errors + chunk.toString("utf8")).slice(-4096)))
  const started = await new Promise<boolean>((resolve) => {
    const timer = setInterval(() => {
      if (head.includes("Plinth main service:")) done(true)
    }, 50)
    const done = (ok: boolean) => {
      clearInterval(timer)
      clearTimeout(limit)
      child.off("exit", onExit)
      resolve(ok)
    }
    const onExit = () => done(false)
    const limit = setTimeout(() => done(false), 60_000)
    child.on("exit", onExit)
  })
  if (!started) {
    await close()
    throw new Error(`plinth serve main did not start:\n${head}\n${errors}`)
  }
  return { url: `http://127.0.0.1:${port}`, cpuMicros: () => processCpuMicros(child.pid!), lines: () => lines, close }
}

/** A server that issue #8 compares Plinth with, started beside it on the bench's database. */
export interface ComparatorServer {
  readonly url: string
  readonly close: () => Promise<void>
}

/** `server` listening on an ephemeral loopback port; closing it ends its connections, then `release`s what it used. */
export const listenComparator = async (server: http.Server, release: () => Promise<void>): Promise<ComparatorServer> => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      await release()
    }
  }
}

export interface LoadPlan {
  readonly url: string
  readonly connections: number
  readonly seconds: number
  readonly warmupSeconds: number
  readonly requests: ReadonlyArray<{ readonly token: string; readonly body: string }>
}

export interface LoadResult {
  /** Requests answered over the whole run, warm-up included. */
  readonly answered: number
  readonly rps: number
  readonly p50: number
  readonly p99: number
  readonly non2xx: number
  readonly errors: number
  /** Requests measured (warm-up not included). */
  readonly requests: number
  /** The measured requests' latencies (bench/stats.ts). */
  readonly histogram: Histogram
}

let plans = 0

/** A load generator kept between runs, so that each run has it warm (its code compiled): bench/http-load.ts. */
export interface LoadGenerator {
  readonly run: (seconds: number, warmupSeconds: number) => Promise<LoadResult>
  readonly close: () => Promise<void>
}

/** The load generator (bench/http-load.ts) in a process of its own, so it does not share the server's CPU time. */
export const startLoadGenerator = (plan: Omit<LoadPlan, "seconds" | "warmupSeconds">): LoadGenerator => {
  // A file of its own for each generator's plan (several may be starting), removed when it exits.
  const planFile = path.join(os.tmpdir(), `plinth-bench-plan-${process.pid}-${++plans}.json`)
  writeFileSync(planFile, JSON.stringify(plan))
  const child = spawn(process.execPath, ["bench/http-load.ts", planFile], { stdio: ["pipe", "pipe", "inherit"] })
  const waiting: Array<{ readonly resolve: (result: LoadResult) => void; readonly reject: (error: Error) => void }> = []
  let out = ""
  child.stdout.on("data", (chunk: Buffer) => {
    out += chunk.toString()
    for (let end = out.indexOf("\n"); end !== -1; end = out.indexOf("\n")) {
      const line = out.slice(0, end)
      out = out.slice(end + 1)
      waiting.shift()?.resolve(JSON.parse(line) as LoadResult)
    }
  })
  const exited = new Promise<void>((resolve) =>
    child.on("exit", (code) => {
      rmSync(planFile, { force: true })
      for (const waiter of waiting.splice(0)) waiter.reject(new Error(`load generator exited ${code}`))
      resolve()
    }))
  return {
    run: (seconds, warmupSeconds) =>
      new Promise<LoadResult>((resolve, reject) => {
        waiting.push({ resolve, reject })
        child.stdin.write(`${JSON.stringify({ seconds, warmupSeconds })}\n`)
      }),
    close: () => {
      child.stdin.end()
      return exited
    }
  }
}

/** One run of a load generator of its own. */
export const runLoad = async (plan: LoadPlan): Promise<LoadResult> => {
  const generator = startLoadGenerator(plan)
  try {
    return await generator.run(plan.seconds, plan.warmupSeconds)
  } finally {
    await generator.close()
  }
}

/**
 * The raw baselines' transaction: what a hand-written server on the driver would send for a
 * request (BEGIN; the settings statement; the statement; COMMIT), no deadline, no pipelining.
 */
export const rawTransaction = (sql: SqlClient.SqlClient, context: RequestContext, text: string, params: ReadonlyArray<unknown> = []) =>
  sql.withTransaction(Effect.andThen(sql.unsafe(SETTINGS_STATEMENT, settingsOf(context)), sql.unsafe(text, params)))

/**
 * A closed loop of raw transactions: `connections` fibers, each starting `oneRequest` again as soon
 * as the last one ended, through a warm-up and then `seconds` of measured samples (sorted, in ms).
 */
export const rawClosedLoop = (
  oneRequest: Effect.Effect<unknown, unknown, SqlClient.SqlClient>,
  options: { readonly connections: number; readonly warmupSeconds: number; readonly seconds: number }
) =>
  Effect.gen(function*() {
    const loop = (until: number, samples: Array<number>): Effect.Effect<void, unknown, SqlClient.SqlClient> =>
      Effect.suspend(() => {
        if (performance.now() >= until) return Effect.void
        const started = performance.now()
        return Effect.andThen(oneRequest, Effect.suspend(() => {
          samples.push(performance.now() - started)
          return loop(until, samples)
        }))
      })
    const all = (until: number, samples: Array<number>) =>
      Effect.forEach(Array.from({ length: options.connections }), () => loop(until, samples), { concurrency: "unbounded" })
    const warm: Array<number> = []
    yield* all(performance.now() + options.warmupSeconds * 1000, warm)
    const samples: Array<number> = []
    const started = performance.now()
    yield* all(started + options.seconds * 1000, samples)
    const seconds = (performance.now() - started) / 1000
    samples.sort((a, b) => a - b)
    return { samples, seconds, warmed: warm.length }
  })
