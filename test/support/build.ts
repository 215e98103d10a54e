/**
 * `npm run build` for the tests that use dist/ (the built `plinth`, the `plinth/client` export).
 * Test files run in parallel, and two builds writing dist/ at once break each other, so a build
 * runs under a lock, and not at all when dist/ is newer than everything it is built from. The
 * console's build (part of npm run build) can also be made alone.
 */
import { spawn } from "node:child_process"
import { mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs"
import path from "node:path"
import { buildConsole, consoleIsStale } from "../../src/layers/ConsoleBuild.ts"

const ROOT = path.resolve(import.meta.dirname, "../..")
const LOCK = path.join(ROOT, ".test-results", "build.lock")
const STAMP = path.join(ROOT, "dist", ".built")
const SOURCES = ["src", "migrations", "sql", "package.json", "tsconfig.json", "tsconfig.build.json"]
/** A lock older than this was left by a run that died: a build takes seconds. */
const STALE_LOCK_MS = 5 * 60_000

const newestIn = (entry: string): number => {
  const stat = statSync(entry)
  if (!stat.isDirectory()) return stat.mtimeMs
  return readdirSync(entry).reduce((newest, name) => Math.max(newest, newestIn(path.join(entry, name))), stat.mtimeMs)
}

const mtimeOr = (file: string, otherwise: number) => {
  try {
    return statSync(file).mtimeMs
  } catch {
    return otherwise
  }
}

const runBuild = () =>
  new Promise<void>((resolve, reject) => {
    const child = spawn("npm", ["run", "--silent", "build"], { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"] })
    let err = ""
    child.stderr.on("data", (chunk: Buffer) => (err += chunk.toString("utf8")))
    child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`npm run build failed: ${err}`))))
  })

const acquire = async () => {
  mkdirSync(path.dirname(LOCK), { recursive: true })
  for (;;) {
    try {
      mkdirSync(LOCK)
      return
    } catch {
      if (Date.now() - mtimeOr(LOCK, Date.now()) > STALE_LOCK_MS) rmSync(LOCK, { recursive: true, force: true })
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }
}

/** dist/ as `npm run build` makes it from the current sources. */
export const ensureBuilt = async (): Promise<void> => {
  await acquire()
  try {
    const sources = Math.max(...SOURCES.map((entry) => newestIn(path.join(ROOT, entry))))
    if (mtimeOr(STAMP, 0) > sources) return
    await runBuild()
    writeFileSync(STAMP, new Date().toISOString())
  } finally {
    rmSync(LOCK, { recursive: true, force: true })
  }
}

/** The console's build (dist/console) from the current sources, under the same lock. */
export const ensureConsoleBuilt = async (): Promise<void> => {
  await acquire()
  try {
    if (consoleIsStale()) await buildConsole()
  } finally {
    rmSync(LOCK, { recursive: true, force: true })
  }
}
