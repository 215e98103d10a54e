/**
 * The console's size budget (issue #25): everything a browser downloads for it, gzipped as the
 * server sends it, is at most 250 KB.
 */
import { readdirSync, statSync } from "node:fs"
import path from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import { CONSOLE_OUTPUT_DIR } from "../../src/layers/ConsoleBuild.ts"
import { ensureConsoleBuilt } from "../support/build.ts"

const BUDGET_BYTES = 250 * 1024

/** Every file of the build but the dot files (never served), relative to its folder. */
const servedFiles = (dir: string, prefix = ""): ReadonlyArray<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    if (entry.name.startsWith(".")) return []
    const name = `${prefix}${entry.name}`
    return entry.isDirectory() ? servedFiles(path.join(dir, entry.name), `${name}/`) : [name]
  })

beforeAll(async () => {
  await ensureConsoleBuilt()
}, 120_000)

describe("the console's budget", () => {
  it("is at most 250 KB gzipped, all files together", () => {
    const files = servedFiles(CONSOLE_OUTPUT_DIR).filter((name) => !name.endsWith(".gz"))
    expect(files).toContain("index.html")
    const sizes = files.map((name) => {
      const gzipped = path.join(CONSOLE_OUTPUT_DIR, `${name}.gz`)
      return { name, raw: statSync(path.join(CONSOLE_OUTPUT_DIR, name)).size, gzipped: statSync(gzipped).size }
    })
    const total = sizes.reduce((sum, file) => sum + file.gzipped, 0)
    console.log(`console: ${sizes.map((file) => `${file.name} ${file.raw} B (${file.gzipped} B gzipped)`).join(", ")}; total ${total} B gzipped`)
    expect(total).toBeLessThanOrEqual(BUDGET_BYTES)
  })
})
