/**
 * A start reads the data directory's postmaster.pid to find a server already running on it (to
 * use it, or to stop one a killed Plinth left). After a reboot that file may name a pid that now
 * belongs to another process: it must be neither used nor signalled.
 */
import { Effect, Option } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { runningServer } from "../../src/layers/EmbeddedPostgres.ts"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup()
})

describe("runningServer", () => {
  it("a leftover postmaster.pid naming another live process is not taken for the server", async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "plinth-pgdata-"))
    const other = spawn("sleep", ["30"], { stdio: "ignore" })
    cleanups.push(async () => {
      other.kill("SIGKILL")
      await fs.rm(dir, { recursive: true, force: true })
    })
    // postmaster.pid's layout: pid, data directory, start time, port, ...
    await fs.writeFile(path.join(dir, "postmaster.pid"), `${other.pid}\n${dir}\n1700000000\n54329\n`)
    expect(Option.isNone(await Effect.runPromise(runningServer(dir)))).toBe(true)
    expect(other.exitCode).toBeNull()
    expect(other.signalCode).toBeNull()
  })
})
