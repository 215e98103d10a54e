/**
 * The console's build: `console/` (Preact + TypeScript, and `plinth/client` from `src/client/`)
 * bundled with rolldown into `dist/console/`, which the main service serves at `/console/`
 * (src/http/ConsoleRoutes.ts). `npm run build` runs it; `plinth start` and `plinth serve main` run
 * it when the output is missing or older than anything it was built from. Run directly
 * (`node src/layers/ConsoleBuild.ts`), it builds once.
 */
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs"
import path from "node:path"
import { gzipSync } from "node:zlib"

/** The folder of the package.json the running code belongs to (in `src/` or in `dist/src/`). */
const packageRoot = (): string => {
  for (let dir = import.meta.dirname; ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, "package.json"))) return dir
    if (path.dirname(dir) === dir) return path.resolve(import.meta.dirname, "../..")
  }
}

const ROOT = packageRoot()
/** The console's sources. */
export const CONSOLE_SOURCE_DIR = path.join(ROOT, "console")
/** What the main service serves at /console/ (never committed: dist/ is ignored). */
export const CONSOLE_OUTPUT_DIR = path.join(ROOT, "dist", "console")
/** The list of what a build was made from, beside its output (a dot file: never served). */
const INPUTS_FILE = ".inputs.json"
/** Changes to these (dependency versions) make the output stale too. */
const PACKAGE_FILES = ["package.json", "package-lock.json"]

interface Inputs {
  /** Every source file of the bundle, relative to the package root. */
  readonly files: ReadonlyArray<string>
}

const mtimeOr = (file: string, otherwise: number): number => {
  try {
    return statSync(file).mtimeMs
  } catch {
    return otherwise
  }
}

const newestIn = (dir: string): number =>
  readdirSync(dir, { withFileTypes: true }).reduce(
    (newest, entry) =>
      Math.max(newest, entry.isDirectory() ? newestIn(path.join(dir, entry.name)) : mtimeOr(path.join(dir, entry.name), 0)),
    mtimeOr(dir, 0)
  )

/**
 * Whether a build is needed: no output, or a source of the last build (the console's folder, the
 * client's modules, the package files) changed after it. A file that is gone counts as changed.
 */
export const consoleIsStale = (): boolean => {
  const inputsFile = path.join(CONSOLE_OUTPUT_DIR, INPUTS_FILE)
  const builtAt = mtimeOr(inputsFile, 0)
  if (builtAt === 0) return true
  let inputs: Inputs
  try {
    inputs = JSON.parse(readFileSync(inputsFile, "utf8")) as Inputs
  } catch {
    return true
  }
  if (newestIn(CONSOLE_SOURCE_DIR) > builtAt) return true
  return [...inputs.files, ...PACKAGE_FILES].some((file) => mtimeOr(path.join(ROOT, file), Infinity) > builtAt)
}

export interface ConsoleBuildResult {
  /** The files written, relative to the output folder. */
  readonly files: ReadonlyArray<string>
  readonly milliseconds: number
}

const hashOf = (content: string | Uint8Array) => createHash("sha256").update(content).digest("hex").slice(0, 10)

/**
 * Bundles the console into a fresh folder and then puts it in place of the output, so that a
 * server never reads a half-written console (and two builds at once each leave a whole one).
 */
export const buildConsole = async (): Promise<ConsoleBuildResult> => {
  const started = performance.now()
  // A devDependency: only a build needs it (an installation without devDependencies serves what was built).
  const { build } = await import("rolldown")
  const output = await build({
    input: { main: path.join(CONSOLE_SOURCE_DIR, "src", "main.tsx") },
    platform: "browser",
    write: false,
    logLevel: "warn",
    tsconfig: path.join(CONSOLE_SOURCE_DIR, "tsconfig.json"),
    resolve: { alias: { "plinth/client": path.join(ROOT, "src", "client", "index.ts") } },
    // JSX as console/tsconfig.json says: Preact's automatic runtime.
    transform: { define: { "process.env.NODE_ENV": "\"production\"" } },
    output: {
      format: "esm",
      minify: true,
      entryFileNames: "assets/[name]-[hash].js",
      chunkFileNames: "assets/[name]-[hash].js"
    }
  })
  const files = new Map<string, string | Uint8Array>()
  const inputs = new Set<string>()
  let entry = ""
  for (const item of output.output) {
    if (item.type === "chunk") {
      files.set(item.fileName, item.code)
      if (item.isEntry) entry = item.fileName
      for (const id of item.moduleIds) {
        if (path.isAbsolute(id) && !id.includes(`${path.sep}node_modules${path.sep}`)) inputs.add(path.relative(ROOT, id))
      }
    } else {
      files.set(item.fileName, item.source)
    }
  }
  const css = readFileSync(path.join(CONSOLE_SOURCE_DIR, "src", "styles.css"), "utf8")
  const cssFile = `assets/styles-${hashOf(css)}.css`
  files.set(cssFile, css)
  const template = readFileSync(path.join(CONSOLE_SOURCE_DIR, "index.html"), "utf8")
  files.set(
    "index.html",
    template.replace(
      "<!-- assets -->",
      `<link rel="stylesheet" href="/console/${cssFile}">\n<script type="module" src="/console/${entry}"></script>`
    )
  )

  removeLeftovers()
  const fresh = `${CONSOLE_OUTPUT_DIR}.${process.pid}-${Date.now()}.tmp`
  const old = `${CONSOLE_OUTPUT_DIR}.${process.pid}-${Date.now()}.old`
  try {
    for (const [name, content] of files) {
      const file = path.join(fresh, name)
      mkdirSync(path.dirname(file), { recursive: true })
      writeFileSync(file, content)
      // Served to browsers that accept gzip (all do), so nothing is compressed per request.
      writeFileSync(`${file}.gz`, gzipSync(content, { level: 9 }))
    }
    writeFileSync(path.join(fresh, INPUTS_FILE), JSON.stringify({ files: [...inputs].sort() } satisfies Inputs))
    if (existsSync(CONSOLE_OUTPUT_DIR)) renameSync(CONSOLE_OUTPUT_DIR, old)
    renameSync(fresh, CONSOLE_OUTPUT_DIR)
  } finally {
    rmSync(fresh, { recursive: true, force: true })
    rmSync(old, { recursive: true, force: true })
  }
  return { files: [...files.keys()].sort(), milliseconds: Math.round(performance.now() - started) }
}

/** What builds stopped halfway (a process killed while building) left beside the output. */
const removeLeftovers = () => {
  const parent = path.dirname(CONSOLE_OUTPUT_DIR)
  const prefix = `${path.basename(CONSOLE_OUTPUT_DIR)}.`
  if (!existsSync(parent)) return
  for (const name of readdirSync(parent)) {
    const full = path.join(parent, name)
    if (name.startsWith(prefix) && /\.(tmp|old)$/.test(name) && Date.now() - mtimeOr(full, Date.now()) > 60_000) {
      rmSync(full, { recursive: true, force: true })
    }
  }
}

/**
 * Builds the console when it is stale; run beside the main service's start, not before it. A
 * failed build does not stop the service (the API works without its console): it is logged, and
 * an older build, if any, is served.
 */
export const ensureConsoleBuilt: Effect.Effect<void> = Effect.suspend(() => {
  if (!existsSync(CONSOLE_SOURCE_DIR) || !consoleIsStale()) return Effect.void
  return Effect.tryPromise(buildConsole).pipe(
    Effect.flatMap((result) => Effect.logInfo(`console: built in ${result.milliseconds} ms`)),
    Effect.catch((error) =>
      Effect.logError(
        `console: build failed (${existsSync(CONSOLE_OUTPUT_DIR) ? "serving the previous build" : "/console/ is unavailable"}): ${
          String(error.cause instanceof Error ? error.cause.message : error.cause).split("\n")[0]
        }`
      )
    )
  )
})

if (import.meta.main) {
  const result = await buildConsole()
  console.log(`console: ${result.files.length} files in ${path.relative(process.cwd(), CONSOLE_OUTPUT_DIR)} (${result.milliseconds} ms)`)
}
