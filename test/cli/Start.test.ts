/**
 * `plinth start` as an operator runs it: the embedded PostgreSQL, both services, Ctrl-C, a second
 * start on the same data, and the one-line errors of a bad environment.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs/promises"
import * as http from "node:http"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runPlinth } from "../support/cli.ts"
import { query } from "../support/database.ts"
import { freePort } from "../support/ports.ts"

let dataDir: string
let env: Record<string, string>

beforeAll(async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "plinth-start-"))
  // mkdtemp makes it 0700; PostgreSQL runs as its own OS user and must pass through.
  await fs.chmod(dataDir, 0o711)
  env = {
    PLINTH_DATA_DIR: path.join(dataDir, "data"),
    PLINTH_PG_PORT: String(await freePort()),
    PORT: String(await freePort()),
    CHAT_PORT: String(await freePort())
  }
})
afterAll(() => fs.rm(dataDir, { recursive: true, force: true }))

/** Whether any process still runs with this data directory on its command line. */
const postgresRunning = async (pgData: string) => {
  const pids = (await fs.readdir("/proc")).filter((entry) => /^\d+$/.test(entry))
  for (const pid of pids) {
    const cmdline = await fs.readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "")
    if (cmdline.includes("postgres") && cmdline.includes(pgData)) return true
  }
  return false
}

const getJson = async (url: string) => {
  const response = await fetch(url)
  return { status: response.status, body: await response.json() as unknown }
}

describe("plinth start", () => {
  it("serves both services on the embedded database and stops cleanly on SIGINT", async () => {
    const plinth = runPlinth(["start"], env)
    await plinth.waitFor(/Plinth chat service: (\S+)/)
    expect(plinth.stdout()).toContain(`Plinth main service: http://127.0.0.1:${env.PORT}`)
    expect(plinth.stdout()).toContain(`Plinth chat service: http://127.0.0.1:${env.CHAT_PORT}`)
    expect(await getJson(`http://127.0.0.1:${env.PORT}/health`)).toEqual({ status: 200, body: { status: "ok" } })
    expect(await getJson(`http://127.0.0.1:${env.CHAT_PORT}/health`)).toEqual({ status: 200, body: { status: "ok" } })
    expect(await getJson(`http://127.0.0.1:${env.PORT}/ready`)).toEqual({ status: 200, body: { status: "ready" } })
    expect(plinth.stderr()).toContain("applied migrations: 0001_roles_and_sys.sql")

    // Secrets file: generated once, readable only by its owner.
    const secrets = await fs.stat(path.join(env.PLINTH_DATA_DIR!, "secrets.json"))
    expect(secrets.mode & 0o777).toBe(0o600)

    const stopping = Date.now()
    plinth.child.kill("SIGINT")
    expect(await plinth.exited).toBe(0)
    expect(Date.now() - stopping).toBeLessThan(10_000)
    expect(await postgresRunning(path.join(env.PLINTH_DATA_DIR!, "pg"))).toBe(false)
  }, 90_000)

  it("the first-owner hint carries this server's data dir and port and works as printed; it goes once an owner exists", async () => {
    const plinth = runPlinth(["start"], env)
    await plinth.waitFor(/Plinth chat service/)
    const hint = (await plinth.waitFor(/^Invite the first owner: (.*)$/m))[1]!
    expect(hint).toBe(`PLINTH_DATA_DIR=${env.PLINTH_DATA_DIR} PLINTH_PG_PORT=${env.PLINTH_PG_PORT} npm run plinth -- invite you@example.com owner`)
    // As a user pastes it into another terminal: nothing of this server's environment but what it says.
    const pasted = spawn("sh", ["-c", hint], { env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp" }, stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    pasted.stdout.on("data", (chunk: Buffer) => (out += chunk.toString("utf8")))
    pasted.stderr.on("data", (chunk: Buffer) => (out += chunk.toString("utf8")))
    expect(await new Promise((resolve) => pasted.on("exit", resolve))).toBe(0)
    expect(out).toContain("Invited you@example.com as owner.")

    // `plinth db url`: the embedded superuser's URL, which psql (here: a client) connects with.
    const url = runPlinth(["db", "url"], env)
    expect(await url.exited).toBe(0)
    const adminUrl = url.stdout().trim()
    expect(adminUrl).toMatch(new RegExp(`^postgres://postgres:[0-9a-f]+@127\\.0\\.0\\.1:${env.PLINTH_PG_PORT}/plinth$`))
    const rows = await query(adminUrl, (sql) => sql<{ user: string; owners: number }>`SELECT current_user AS user, (SELECT count(*)::int FROM sys.users WHERE role = 'owner') AS owners`)
    expect(rows).toEqual([{ user: "postgres", owners: 1 }])

    plinth.child.kill("SIGTERM")
    expect(await plinth.exited).toBe(0)
    const again = runPlinth(["start"], env)
    await again.waitFor(/Plinth chat service/)
    again.child.kill("SIGTERM")
    expect(await again.exited).toBe(0)
    expect(again.stdout()).not.toContain("Invite the first owner")
  }, 90_000)

  it("a second start reuses the data and applies no migration twice; SIGTERM stops it too", async () => {
    const plinth = runPlinth(["start"], env)
    await plinth.waitFor(/Plinth chat service/)
    expect(await getJson(`http://127.0.0.1:${env.PORT}/ready`)).toEqual({ status: 200, body: { status: "ready" } })
    expect(plinth.stderr()).not.toContain("applied migrations")
    plinth.child.kill("SIGTERM")
    expect(await plinth.exited).toBe(0)
    expect(await postgresRunning(path.join(env.PLINTH_DATA_DIR!, "pg"))).toBe(false)
  }, 90_000)

  it("SIGINT ends open event streams and still exits within 10 s", async () => {
    const plinth = runPlinth(["start"], env)
    await plinth.waitFor(/Plinth chat service/)
    const invite = runPlinth(["invite", "stream@plinth.test", "member"], env)
    expect(await invite.exited).toBe(0)
    const magic = invite.stdout().match(/token=([0-9a-f]{64})/)![1]!
    const verified = await fetch(`http://127.0.0.1:${env.PORT}/auth/magic-link/verify`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ token: magic })
    })
    const { token } = await verified.json() as { token: string }
    let connected: () => void = () => undefined
    const opened = new Promise<void>((resolve) => (connected = resolve))
    const ended = new Promise<string>((resolve) => {
      http.get(`http://127.0.0.1:${env.PORT}/events?token=${token}`, (response) => {
        let text = ""
        response.setEncoding("utf8")
        response.on("data", (chunk: string) => {
          text += chunk
          if (text.includes(": connected")) connected()
        })
        response.on("end", () => resolve(text))
        response.on("error", () => resolve(text))
        response.on("close", () => resolve(text))
      })
    })
    await Promise.race([opened, ended])
    const stopping = Date.now()
    plinth.child.kill("SIGINT")
    expect(await ended).toContain(": connected")
    expect(await plinth.exited).toBe(0)
    expect(Date.now() - stopping).toBeLessThan(10_000)
  }, 90_000)

  it("plinth migrate on the embedded database reports it is up to date", async () => {
    const plinth = runPlinth(["migrate"], env)
    expect(await plinth.exited).toBe(0)
    expect(plinth.stderr()).toContain("migrations: up to date")
  }, 90_000)
})

describe("a bad environment is one line and exit code 1", () => {
  const oneLineFailure = async (overrides: Record<string, string>, expected: RegExp) => {
    const plinth = runPlinth(["start"], { ...env, ...overrides })
    expect(await plinth.exited).toBe(1)
    const lines = plinth.stderr().trim().split("\n")
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(expected)
    expect(plinth.stderr()).not.toMatch(/\bat .*\.ts:\d+/) // no stack trace
  }

  it("PORT=abc", () => oneLineFailure({ PORT: "abc" }, /^plinth: invalid configuration: PORT: /))
  it("JWT_TTL=soon", () => oneLineFailure({ JWT_TTL: "soon" }, /^plinth: invalid configuration: JWT_TTL: /))

  it("a taken PostgreSQL port", async () => {
    const blocker = net.createServer().listen(Number(env.PLINTH_PG_PORT), "127.0.0.1")
    await new Promise((resolve) => blocker.once("listening", resolve))
    try {
      await oneLineFailure({}, new RegExp(`port ${env.PLINTH_PG_PORT} is already in use \\(set PLINTH_PG_PORT`))
    } finally {
      blocker.close()
    }
  }, 60_000)

  it("a taken HTTP port", async () => {
    const blocker = net.createServer().listen(Number(env.PORT), "127.0.0.1")
    await new Promise((resolve) => blocker.once("listening", resolve))
    try {
      await oneLineFailure({}, new RegExp(`main service: port ${env.PORT} is already in use \\(set PORT\\)`))
    } finally {
      blocker.close()
    }
    expect(await postgresRunning(path.join(env.PLINTH_DATA_DIR!, "pg"))).toBe(false)
  }, 60_000)

  it("a taken port fails before a new data directory is initialised", async () => {
    const fresh = path.join(dataDir, "fresh")
    for (const variable of ["PLINTH_PG_PORT", "PORT", "CHAT_PORT"] as const) {
      const blocker = net.createServer().listen(Number(env[variable]), "127.0.0.1")
      await new Promise((resolve) => blocker.once("listening", resolve))
      try {
        await oneLineFailure({ PLINTH_DATA_DIR: fresh }, new RegExp(`port ${env[variable]} is already in use \\(set ${variable}`))
      } finally {
        blocker.close()
      }
      expect(await fs.access(path.join(fresh, "pg", "PG_VERSION")).then(() => true, () => false)).toBe(false)
    }
  }, 60_000)

  it("an unwritable data directory", async () => {
    const file = path.join(dataDir, "a-file")
    await fs.writeFile(file, "")
    await oneLineFailure({ PLINTH_DATA_DIR: path.join(file, "data") }, /^plinth: cannot create data directory .*: ENOTDIR$/)
  })
})

it("a data directory the postgres user cannot reach is named in one line", async () => {
  if (process.getuid?.() !== 0) return // only root hands the cluster to another OS user
  const closed = await fs.mkdtemp(path.join(os.tmpdir(), "plinth-closed-"))
  try {
    const plinth = runPlinth(["start"], { ...env, PLINTH_DATA_DIR: path.join(closed, "data") })
    expect(await plinth.exited).toBe(1)
    expect(plinth.stderr().trim()).toBe(`plinth: the postgres OS user cannot enter ${closed}; allow it (chmod o+x ${closed}) or set PLINTH_DATA_DIR elsewhere`)
  } finally {
    await fs.rm(closed, { recursive: true, force: true })
  }
})

describe("plinth --help", () => {
  it.each([[[]], [["start"]], [["serve"]], [["migrate"]]])("%j --help prints usage", async (args) => {
    const plinth = runPlinth([...args, "--help"], env)
    expect(await plinth.exited).toBe(0)
    expect(plinth.stdout()).toMatch(/USAGE/i)
  })
})
