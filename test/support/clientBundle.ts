/** `plinth/client` bundled for a browser page (as a web app's bundler would), with rolldown. */
import path from "node:path"
import { build } from "rolldown"

const ENTRY = path.resolve(import.meta.dirname, "../../src/client/index.ts")

/** One ES module with every import inlined; its exports are the client's. */
export const bundleClient = async (): Promise<string> => {
  const output = await build({ input: ENTRY, platform: "browser", write: false, logLevel: "warn", output: { format: "esm" } })
  return output.output.map((chunk) => (chunk.type === "chunk" ? chunk.code : "")).join("\n")
}

/** The modules a bundle still loads at run time (`import … from`, `import()`, `require()`). */
export const importsLeftIn = (code: string): ReadonlyArray<string> => [
  ...new Set([...code.matchAll(/^\s*(?:import|export)\b[^;=()"'`]*?\bfrom\s*["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']\s*\)|\brequire\(\s*["']([^"']+)["']\s*\)/gm)]
    .map((match) => match[1] ?? match[2] ?? match[3]!))
]
