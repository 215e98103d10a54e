/**
 * Page saves through POST /sql share the service's page checker: its workers are kept from one
 * save to the next (a save no longer starts a thread and loads the parser), a slow source ends
 * only its own worker, and closing the service ends every worker. The save's latency is logged
 * (docs/performance-notes.md), not asserted.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { MAX_PARALLEL_PARSES } from "../../src/services/PageChecker.ts"
import { type AuthStack, post, type SignIn, signedIn, startAuthStack } from "../support/auth.ts"
import type { PlainErrorBody, SqlResult } from "../sql/fixtures.ts"

let stack: AuthStack | undefined
let owner: SignIn

beforeAll(async () => {
  stack = await startAuthStack()
  owner = await signedIn(stack, "owner@plinth.test", "owner")
})
afterAll(() => stack?.close())

let counter = 0
const freshSlug = () => `saved-${++counter}`

const create = (slug: string, source: string) =>
  post<SqlResult | PlainErrorBody>(stack!.main.url, "/sql", { sql: "SELECT sys.create_page($1, 'T', $2)", params: [slug, source] }, { token: owner.token })

const PAGE = "# Items\n\n```sql totals\nSELECT 1 AS n\n```\n\n```value query=totals column=n\n```\n"

describe("page saves reuse the page checker's workers", () => {
  it("20 saves in a row start no more workers than the pool has", async () => {
    const took: Array<number> = []
    for (let n = 0; n < 20; n++) {
      const start = performance.now()
      const saved = await create(freshSlug(), PAGE)
      took.push(performance.now() - start)
      expect(saved.status).toBe(200)
    }
    const usage = stack!.main.pages.usage()
    expect(usage.started).toBeLessThanOrEqual(MAX_PARALLEL_PARSES)
    expect(usage.exited).toBe(0)
    const median = [...took].sort((a, b) => a - b)[took.length / 2]!
    console.log(`page save through POST /sql, median of 20: ${median.toFixed(1)} ms (${usage.started} worker started)`)
  })

  it("a slow source followed at once by a normal one: the slow one is a 400, the normal one is saved", async () => {
    const slow = create(freshSlug(), "- ".repeat(100_000) + "x")
    const slug = freshSlug()
    const normal = await create(slug, PAGE)
    expect(normal.status).toBe(200)
    const refused = await slow
    expect(refused.status).toBe(400)
    expect((refused.body as PlainErrorBody).error).toMatch(/^the page source is too complex to check/)
    // And after it, on the pool it left.
    expect((await create(freshSlug(), PAGE)).status).toBe(200)
    const usage = stack!.main.pages.usage()
    expect(usage.workers).toBeLessThanOrEqual(MAX_PARALLEL_PARSES)
    expect(usage.busy).toBe(0)
  })

  it("closing the service ends every worker its page checker started", async () => {
    const pages = stack!.main.pages
    expect(pages.usage().started).toBeGreaterThan(0)
    await stack!.close()
    stack = undefined
    const usage = pages.usage()
    expect(usage.exited).toBe(usage.started)
    expect(usage.workers).toBe(0)
  })
})
