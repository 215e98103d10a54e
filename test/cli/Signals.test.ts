/**
 * `npm start` as a user runs it, in a process group of its own as a terminal would give it: SIGINT
 * and SIGTERM to npm, to Plinth's node process and to the whole group (and SIGHUP to the group, a
 * closed terminal) each stop everything (npm,
 * Plinth, the embedded PostgreSQL) with a usual exit code and no stack trace; a Plinth whose parent
 * dies stops too; and a PostgreSQL left running by a killed Plinth is stopped by the next start.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { eventually } from "../support/eventually.ts"
import { freePort } from "../support/ports.ts"

let dataDir: string
let env: Record<string, string>

beforeAll(async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "plinth-signals-"))
  // mkdtemp makes it 0700; PostgreSQL runs as its own OS user and must pass through.
  await fs.chmod(dataDir, 0o711)
  env = {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "/tmp",
    PLINTH_DATA_DIR: path.join(dataDir, "data"),
    PLINTH_PG_PORT: String(await freePort()),
    PORT: String(await freePort()),
    CHAT_PORT: String(await freePort())
  }
})
afterAll(() => fs.rm(dataDir, { recursive: true, force: true }))

const STOPPED_WITHIN_MS = 10_000
const SIGNAL_NUMBERS = { SIGHUP: 1, SIGINT: 2, SIGTERM: 15 } as const

interface NpmStart {
  readonly npm: ChildProcess
  readonly output: () => string
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  /** Plinth's node process and the PostgreSQL postmaster it runs. */
  readonly plinthPid: number
  readonly postgresPid: number
}

const stat = async (pid: number) => {
  const text = await fs.readFile(`/proc/${pid}/stat`, "utf8").catch(() => "")
  // pid (comm) state ppid pgrp ...: comm may hold spaces, so split after its closing parenthesis.
  const [state, ppid, pgrp] = text.slice(text.lastIndexOf(")") + 2).split(" ")
  return text === "" ? undefined : { state: state!, ppid: Number(ppid), pgrp: Number(pgrp) }
}

/** A process that still runs (a zombie waiting to be reaped has stopped). */
const alive = async (pid: number) => {
  const found = await stat(pid)
  return found !== undefined && found.state !== "Z"
}

/** The live processes of process group `pgid`. */
const groupMembers = async (pgid: number) => {
  const members: Array<number> = []
  for (const entry of await fs.readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    const found = await stat(Number(entry))
    if (found?.pgrp === pgid && found.state !== "Z") members.push(Number(entry))
  }
  return members
}

const postmasterPid = async () =>
  Number((await fs.readFile(path.join(env.PLINTH_DATA_DIR!, "pg", "postmaster.pid"), "utf8")).split("\n")[0])

/** `npm start` in its own process group, once both services listen. */
const npmStart = async (): Promise<NpmStart> => {
  const npm = spawn("npm", ["start"], { env, detached: true, stdio: ["ignore", "pipe", "pipe"] })
  let out = ""
  npm.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString("utf8")))
  npm.stderr!.on("data", (chunk: Buffer) => (out += chunk.toString("utf8")))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    npm.on("exit", (code, signal) => resolve({ code, signal }))
  )
  const ready = await eventually(async () => out.includes("Plinth chat service"), 60_000)
  if (!ready) throw new Error(`npm start did not come up:\n${out}`)
  // npm runs the script with `sh -c "exec node ..."`: Plinth is npm's child.
  const children = (await fs.readFile(`/proc/${npm.pid}/task/${npm.pid}/children`, "utf8")).trim().split(" ").map(Number)
  const plinthPid = children.find((pid) => pid > 0)!
  expect(await fs.readFile(`/proc/${plinthPid}/cmdline`, "utf8")).toContain("src/cli/main.ts\0start")
  return { npm, output: () => out, exited, plinthPid, postgresPid: await postmasterPid() }
}

/** Everything stopped within 10 s: nothing left in the group, Plinth and PostgreSQL gone, no stack trace. */
const expectAllStopped = async (run: NpmStart) => {
  const group = run.npm.pid!
  expect(await eventually(async () => (await groupMembers(group)).length === 0 && !(await alive(run.plinthPid)) && !(await alive(run.postgresPid)), STOPPED_WITHIN_MS, 100)).toBe(true)
  expect(run.output()).not.toMatch(/^\s+at /m)
  expect(run.output()).not.toMatch(/\bWARN\b|\bERROR\b/)
}

describe("npm start stops on a signal", () => {
  it.each([
    ["SIGINT", "npm"],
    ["SIGTERM", "npm"],
    ["SIGINT", "plinth"],
    ["SIGTERM", "plinth"],
    ["SIGINT", "group"],
    ["SIGTERM", "group"],
    // A closed terminal.
    ["SIGHUP", "group"]
  ] as const)("%s to %s", async (signal, target) => {
    const run = await npmStart()
    const pid = target === "npm" ? run.npm.pid! : target === "plinth" ? run.plinthPid : -run.npm.pid!
    process.kill(pid, signal)
    const exit = await run.exited
    expect([0, 128 + SIGNAL_NUMBERS[signal]]).toContain(exit.code ?? 128 + SIGNAL_NUMBERS[exit.signal as keyof typeof SIGNAL_NUMBERS])
    await expectAllStopped(run)
  }, 90_000)
})

describe("a Plinth left without its parent", () => {
  it("stops when npm is killed (SIGKILL), and PostgreSQL with it", async () => {
    const run = await npmStart()
    process.kill(run.npm.pid!, "SIGKILL")
    await run.exited
    await expectAllStopped(run)
  }, 90_000)

  it("a killed Plinth leaves PostgreSQL running; the next start stops it and starts cleanly", async () => {
    const killed = await npmStart()
    process.kill(killed.plinthPid, "SIGKILL")
    await killed.exited
    expect(await eventually(async () => !(await alive(killed.plinthPid)), STOPPED_WITHIN_MS)).toBe(true)
    expect(await alive(killed.postgresPid)).toBe(true)

    const next = await npmStart()
    expect(await alive(killed.postgresPid)).toBe(false)
    expect(next.postgresPid).not.toBe(killed.postgresPid)
    expect(next.output()).toContain(`stopping the PostgreSQL a stopped Plinth left running`)
    const ready = await fetch(`http://127.0.0.1:${env.PORT}/ready`)
    expect(ready.status).toBe(200)
    process.kill(next.npm.pid!, "SIGTERM")
    await next.exited
    await expectAllStopped({ ...next, output: () => next.output().replace(/^.*stopping the PostgreSQL.*$/m, "") })
  }, 90_000)
})
