/**
 * Imports point down the layer list: cli → layers → http → actors → services (README,
 * Architecture). Read from the import lines of every file under src/: a file may import its own
 * folder or one further down, never one above. `src/client`, where it exists, stands beside the
 * list: it may use the API definitions of src/http and the types of src/services, and nothing in
 * src imports it. What it loads, followed through src, is only `effect`: no `node:` module, driver,
 * JWT library or server service, so it runs in a browser (test/client/Package.test.ts bundles it).
 */
import { readdirSync, readFileSync } from "node:fs"
import path from "node:path"
import { describe, expect, it } from "vitest"

const SRC = path.resolve(import.meta.dirname, "../../src")
const LAYERS = ["cli", "layers", "http", "actors", "services"] as const
const CLIENT_MAY_IMPORT = new Set(["client", "http", "services"])

/** The specifiers of a file's static imports and re-exports, and of its dynamic `import()`s. */
const importsOf = (source: string): ReadonlyArray<string> => [
  // What stands between the keyword and `from` is names, braces and commas: never `=`, `(` or a quote.
  ...source.matchAll(/^\s*(?:import|export)\b[^;=()"'`]*?\bfrom\s*["']([^"']+)["']/gm),
  ...source.matchAll(/^\s*import\s*["']([^"']+)["']/gm),
  ...source.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g)
].map((match) => match[1]!)

/** The top folder under src/ of a file (`http` for src/http/Errors.ts). */
const folderOf = (file: string) => path.relative(SRC, file).split(path.sep)[0]!

/** `from → to` for each import of a file under src/ that points up the list (or into src/client). */
const upwardImports = (files: ReadonlyArray<{ readonly file: string; readonly source: string }>): ReadonlyArray<string> =>
  files.flatMap(({ file, source }) => {
    const from = folderOf(file)
    return importsOf(source).filter((specifier) => specifier.startsWith(".")).flatMap((specifier) => {
      const target = path.resolve(path.dirname(file), specifier)
      if (!target.startsWith(`${SRC}${path.sep}`)) return []
      const to = folderOf(target)
      const allowed = from === "client"
        ? CLIENT_MAY_IMPORT.has(to)
        : to !== "client" && LAYERS.indexOf(to as never) >= LAYERS.indexOf(from as never) && LAYERS.includes(from as never)
      return allowed ? [] : [`${path.relative(SRC, file)} → ${path.relative(SRC, target)}`]
    })
  })

/** The specifiers a file loads when it runs: `import type` and `export type` lines are erased. */
const runtimeImportsOf = (source: string): ReadonlyArray<string> => [
  ...source.matchAll(/^\s*(?:import|export)\b(?!\s+type\b)[^;=()"'`]*?\bfrom\s*["']([^"']+)["']/gm),
  ...source.matchAll(/^\s*import\s*["']([^"']+)["']/gm),
  ...source.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g)
].map((match) => match[1]!)

/** Every package `entries` load, following relative imports through src: `file → package` for each. */
const packagesLoadedBy = (entries: ReadonlyArray<string>): ReadonlyArray<string> => {
  const seen = new Set<string>()
  const packages: Array<string> = []
  const visit = (file: string) => {
    if (seen.has(file)) return
    seen.add(file)
    for (const specifier of runtimeImportsOf(readFileSync(file, "utf8"))) {
      if (specifier.startsWith(".")) visit(path.resolve(path.dirname(file), specifier))
      else packages.push(`${path.relative(SRC, file)} → ${specifier}`)
    }
  }
  entries.forEach(visit)
  return packages
}

const sourceFiles = (dir: string): ReadonlyArray<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name)
    return entry.isDirectory() ? sourceFiles(full) : /\.(ts|tsx|mts|js)$/.test(entry.name) ? [full] : []
  })

describe("import direction", () => {
  it("no file under src/ imports a folder above its own", () => {
    const files = sourceFiles(SRC).map((file) => ({ file, source: readFileSync(file, "utf8") }))
    expect(files.length).toBeGreaterThan(50)
    expect(files.map((file) => folderOf(file.file)).filter((folder) => folder !== "client" && !LAYERS.includes(folder as never))).toEqual([])
    expect(upwardImports(files)).toEqual([])
  })

  it("the client loads nothing but effect, however far its imports lead", () => {
    const client = sourceFiles(path.join(SRC, "client"))
    expect(client.length).toBeGreaterThan(0)
    expect(packagesLoadedBy(client).filter((loaded) => !/ → effect(\/[a-z-]+)?$/.test(loaded))).toEqual([])
  })

  it("the client check follows imports and skips type-only ones", () => {
    const loaded = packagesLoadedBy([path.join(SRC, "http/Validation.ts")])
    expect(loaded).toContain("http/Validation.ts → node:http")
    expect(loaded).toContain("http/HttpServerLive.ts → node:http")
    expect(runtimeImportsOf(`import type { Principal } from "jose"\nexport type { X } from "pg"\nimport { type A, B } from "./B.ts"`)).toEqual(["./B.ts"])
  })

  it("the check sees an upward import in each form an import line takes", () => {
    const at = (folder: string, source: string) => ({ file: path.join(SRC, folder, "X.ts"), source })
    expect(upwardImports([
      at("services", `import { MainRoutes } from "../http/MainRoutes.ts"`),
      at("actors", `import type {\n  Layer\n} from "../layers/Services.ts"`),
      at("http", `export { serve } from "../cli/main.ts"`),
      at("services", `const lazy = () => import("../actors/Tenants.ts")`),
      at("layers", `import "../cli/main.ts"`),
      at("http", `import { client } from "../client/index.ts"`),
      at("client", `import { Tenants } from "../actors/Tenants.ts"`),
      at("http", `import { Effect } from "effect"\nimport { quoteIdentifier } from "../services/SqlIdentifier.ts"`),
      at("cli", `import { MainService } from "../layers/Services.ts"`)
    ])).toEqual([
      "services/X.ts → http/MainRoutes.ts",
      "actors/X.ts → layers/Services.ts",
      "http/X.ts → cli/main.ts",
      "services/X.ts → actors/Tenants.ts",
      "layers/X.ts → cli/main.ts",
      "http/X.ts → client/index.ts",
      "client/X.ts → actors/Tenants.ts"
    ])
  })
})
