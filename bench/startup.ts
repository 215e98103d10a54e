/**
 * `startup`: `npm start` until both services answer GET /health 200, on a data directory that
 * already holds an app (200 managed tables, 100,000 rows). Beside it, the raw baseline of the
 * same run: the embedded PostgreSQL alone, started on the same data until it accepts connections.
 * Rounds alternate between the two.
 */
import { Effect, Exit, Scope } from "effect"
import { SqlClient } from "effect/sql"
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { EMBEDDED_DATABASE, withDatabase } from "../src/layers/Database.ts"
import { startEmbeddedPostgres } from "../src/layers/EmbeddedPostgres.ts"
import { summarize } from "./stats.ts"
import { freePort } from "./support.ts"

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const TABLES = 200
const ROWS = 100_000

interface Started {
  readonly ms: number
  readonly stop: () => Promise<void>
}

const healthy = async (url: string) => {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(1_000) })).status === 200
  } catch {
    return false
  }
}

const exited = (child: ChildProcess) =>
  new Promise<void>((resolve) => child.exitCode !== null || child.signalCode !== null ? resolve() : child.once("exit", () => resolve()))

/** `npm start` in its own process group, timed until both /health answer 200. */
const npmStart = async (env: Record<string, string>): Promise<Started> => {
  const started = performance.now()
  const child = spawn("npm", ["start"], { env: { ...process.env, ...env }, stdio: ["ignore", "ignore", "pipe"], detached: true })
  let stderr = ""
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
  const stop = async () => {
    if (child.exitCode === null) process.kill(-child.pid!, "SIGINT")
    await exited(child)
  }
  for (;;) {
    if (child.exitCode !== null) throw new Error(`npm start exited with ${child.exitCode}: ${stderr}`)
    if (await healthy(`http://127.0.0.1:${env.PORT}/health`) && await healthy(`http://127.0.0.1:${env.CHAT_PORT}/health`)) break
    if (performance.now() - started > 60_000) {
      await stop()
      throw new Error(`npm start: no /health within 60 s: ${stderr}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  return { ms: performance.now() - started, stop }
}

/** The embedded PostgreSQL alone on the same data directory, as `npm start` starts it. */
const postgresAlone = async (dataDir: string, port: number, superuserPassword: string): Promise<Started> => {
  const scope = Effect.runSync(Scope.make())
  const started = performance.now()
  await Effect.runPromise(Scope.provide(scope)(startEmbeddedPostgres({ pgData: path.join(dataDir, "pg"), port, superuserPassword })))
  return { ms: performance.now() - started, stop: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}

/** The existing data: what an app built over a while leaves behind. */
const fill = async (adminUrl: string) =>
  Effect.runPromise(withDatabase(adminUrl, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    for (let i = 0; i < TABLES; i++) {
      const name = `t${String(i).padStart(3, "0")}`
      yield* sql`SELECT sys.create_table(${name}, ${JSON.stringify([{ name: "name", type: "text", required: true }, { name: "amount", type: "currency" }])}::jsonb)`
    }
    yield* sql.unsafe(`INSERT INTO public.t000 (name, amount) SELECT md5(n::text), n FROM generate_series(1, ${ROWS}) AS n`)
    yield* sql`ANALYZE`
  })))

export const run = async () => {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "plinth-bench-startup-"))
  await fs.chmod(dataDir, 0o711)
  try {
    const env = {
      PLINTH_DATA_DIR: dataDir,
      PORT: String(await freePort()),
      CHAT_PORT: String(await freePort()),
      PLINTH_PG_PORT: String(await freePort()),
      LOG_LEVEL: "Warn",
      JWT_SECRET: randomBytes(32).toString("hex")
    }
    // The first start creates the cluster and migrates; it is not what is measured.
    const first = await npmStart(env)
    const secrets = JSON.parse(await fs.readFile(path.join(dataDir, "secrets.json"), "utf8")) as { postgres: string }
    await fill(`postgres://postgres:${secrets.postgres}@127.0.0.1:${env.PLINTH_PG_PORT}/${EMBEDDED_DATABASE}`)
    await first.stop()

    const plinth: Array<number> = []
    const raw: Array<number> = []
    for (let round = 0; round < ROUNDS; round++) {
      const started = await npmStart(env)
      plinth.push(started.ms)
      await started.stop()
      const alone = await postgresAlone(dataDir, Number(env.PLINTH_PG_PORT), secrets.postgres)
      raw.push(alone.ms)
      await alone.stop()
    }
    const p = summarize(plinth)
    const r = summarize(raw)
    return [
      `### startup: \`npm start\` to both /health 200, ${TABLES} managed tables and ${ROWS.toLocaleString("en")} rows, ${ROUNDS} interleaved rounds (ms)`,
      "",
      "| measure | min | median | max | target | |",
      "| --- | --- | --- | --- | --- | --- |",
      `| npm start → both /health | ${p.min.toFixed(0)} | **${p.p50.toFixed(0)}** | ${p.max.toFixed(0)} | ≤ 5000 | ${p.p50 <= 5_000 ? "met" : "not met"} |`,
      `| raw: embedded PostgreSQL alone, accepting connections | ${r.min.toFixed(0)} | ${r.p50.toFixed(0)} | ${r.max.toFixed(0)} | | |`
    ].join("\n")
  } finally {
    await fs.rm(dataDir, { recursive: true, force: true })
  }
}

if (import.meta.main) console.log(await run())
