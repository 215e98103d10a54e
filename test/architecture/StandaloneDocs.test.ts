/**
 * The repository stands alone (issue #21): no file refers to a document outside it (the design
 * notes and the interface contract Plinth was first written against live elsewhere), and every
 * relative link of its Markdown files leads to a file inside it.
 */
import { execFileSync } from "node:child_process"
import { existsSync, readFileSync } from "node:fs"
import path from "node:path"
import { describe, expect, it } from "vitest"

const ROOT = path.resolve(import.meta.dirname, "../..")
const SELF = path.relative(ROOT, import.meta.filename)

/** Tracked files, and new ones not yet added (ignored files are neither). */
const repositoryFiles = (): ReadonlyArray<string> =>
  execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard"], { cwd: ROOT, encoding: "utf8" })
    .split("\n")
    .filter((file) => file !== "" && existsSync(path.join(ROOT, file)))

const TEXT = /\.(ts|js|mjs|cjs|json|md|sql|sh|yml|yaml|txt)$|(^|\/)(run|\.gitignore|\.npmrc)$/
/** Written in pieces, so that this file does not name them itself. */
const OUTSIDE = [
  ["shared", "/"].join(""),
  ["..", "/shared"].join(""),
  ["interface", ".md"].join(""),
  ["DESIGN", ".md"].join(""),
  ["EFFECT4", ".md"].join(""),
  ["STYLE", ".md"].join("")
]

/** `file:line: text` for each line of `files` naming one of `needles`. */
const referencesOutside = (files: ReadonlyArray<{ readonly file: string; readonly text: string }>, needles = OUTSIDE) =>
  files.flatMap(({ file, text }) =>
    text.split("\n").flatMap((line, index) => (needles.some((needle) => line.includes(needle)) ? [`${file}:${index + 1}: ${line.trim().slice(0, 120)}`] : []))
  )

/** The relative link targets of a Markdown text (`[a](docs/x.md#y)` → `docs/x.md`). */
const relativeLinks = (markdown: string): ReadonlyArray<string> =>
  [...markdown.matchAll(/\]\(([^)\s]+)\)/g)]
    .map((match) => match[1]!.split("#")[0]!)
    .filter((target) => target !== "" && !/^[a-z][a-z0-9+.-]*:/i.test(target))

describe("the repository stands alone", () => {
  const files = repositoryFiles().filter((file) => TEXT.test(file) && file !== SELF && file !== "package-lock.json")

  it("no file refers to a document outside the repository", () => {
    const read = files.map((file) => ({ file, text: readFileSync(path.join(ROOT, file), "utf8") }))
    expect(referencesOutside(read)).toEqual([])
  })

  it("every relative link of a Markdown file leads to a file of the repository", () => {
    const broken = files.filter((file) => file.endsWith(".md")).flatMap((file) =>
      relativeLinks(readFileSync(path.join(ROOT, file), "utf8")).flatMap((target) => {
        const resolved = path.resolve(ROOT, path.dirname(file), decodeURIComponent(target))
        const inside = resolved === ROOT || resolved.startsWith(`${ROOT}${path.sep}`)
        return inside && existsSync(resolved) ? [] : [`${file}: ${target}`]
      })
    )
    expect(broken).toEqual([])
  })

  it("the checks see what they look for", () => {
    expect(referencesOutside([{ file: "README.md", text: `see ${OUTSIDE[0]}spec/x` }])).toEqual([`README.md:1: see ${OUTSIDE[0]}spec/x`])
    expect(relativeLinks("[api](docs/api.md#errors), [site](https://example.com), [up](../notes.md)")).toEqual(["docs/api.md", "../notes.md"])
  })
})
