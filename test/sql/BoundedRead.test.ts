/**
 * A SELECT of more than one row is read, from its second call on, in one round trip as a prepared
 * statement (AsCaller's `boundedPipelined`: up to 100 rows and 1 MiB), instead of the long way's
 * streamed, unprepared statement. The answer is the long way's to the byte: the same rows, order,
 * columns and values; a result over the bounds, and a SELECT that writes, still go the long way
 * (and write once); errors point into the caller's text.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, type SignIn, signedIn, startAuthStack } from "../support/auth.ts"
import { query } from "../support/database.ts"
import { type DatabaseErrorBody, ddl, type SqlResult, sqlRequest } from "./fixtures.ts"

let stack: AuthStack
let member: SignIn

beforeAll(async () => {
  stack = await startAuthStack()
  await ddl(stack, `
    CREATE TABLE public.bounded (id int PRIMARY KEY, label text, amount numeric(12, 2), at timestamptz, tags text[], doc jsonb, big text);
    INSERT INTO public.bounded
      SELECT n, 'row ' || n, n * 1.5, '2026-01-01T00:00:00Z'::timestamptz + make_interval(days => n), ARRAY['a', 'b' || n],
        jsonb_build_object('n', n, 'nested', jsonb_build_array(n, null, true)), NULL
      FROM generate_series(1, 300) AS n;
    CREATE TABLE public.bounded_log (n int);
    CREATE FUNCTION public.bounded_logged(n int) RETURNS int LANGUAGE sql VOLATILE AS 'INSERT INTO public.bounded_log VALUES (n) RETURNING n';
    GRANT SELECT, UPDATE ON public.bounded TO member;
    GRANT SELECT, INSERT ON public.bounded_log TO member;
    GRANT EXECUTE ON FUNCTION public.bounded_logged(int) TO member;
  `)
  member = await signedIn(stack, "bounded-read@plinth.test", "member")
})
afterAll(() => stack?.close())

/** POST /sql as the member: the status, the body's exact text, and the body. */
const run = async (sql: string, params?: ReadonlyArray<unknown>) => {
  const response = await fetch(`${stack.main.url}/sql`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${member.token}` },
    body: JSON.stringify(params === undefined ? { sql } : { sql, params })
  })
  const text = await response.text()
  return { status: response.status, text, body: JSON.parse(text) as SqlResult }
}

/** The answer of the first call (the long way) and of the next two (bounded, or the long way again). */
const threeCalls = async (sql: string, params?: ReadonlyArray<unknown>) => {
  const answers = []
  for (let i = 0; i < 3; i++) answers.push(await run(sql, params))
  return answers
}

/** Which way a call went: the long way's transaction may write, a peek's and a bounded read's may not. */
const readOnly = (answer: { readonly body: SqlResult }) => answer.body.rows.map((row) => row["ro"])

describe("a SELECT of a few rows, called again", () => {
  it("answers exactly what the long way answered: rows, order, columns (duplicates too) and values", async () => {
    const statements: ReadonlyArray<[string, ReadonlyArray<unknown>?]> = [
      ["SELECT id, label, amount, at, tags, doc FROM bounded WHERE id <= $1 ORDER BY id DESC", [20]],
      ["SELECT 1 AS a, 2 AS a, NULL::text AS c FROM bounded WHERE id <= 3 ORDER BY id"],
      ["SELECT FROM bounded WHERE id <= 5"],
      ["SELECT b AS whole, b.id::bigint AS wide, b.id::float8 / 3 AS ratio FROM bounded b WHERE b.id < 4 ORDER BY b.id;"],
      ["SELECT label FROM bounded WHERE id < 0"],
      ["SELECT id FROM bounded ORDER BY id LIMIT 100 -- a trailing comment"]
    ]
    for (const [sql, params] of statements) {
      const [first, second, third] = await threeCalls(sql, params)
      expect(first!.status, sql).toBe(200)
      expect(first!.text.startsWith("{\"rows\":["), sql).toBe(true)
      expect(second!.text, sql).toBe(first!.text)
      expect(third!.text, sql).toBe(first!.text)
    }
  })

  it("is read bounded from its second call on (read-only, like a peek), the long way only on its first", async () => {
    const answers = await threeCalls("SELECT current_setting('transaction_read_only') AS ro FROM generate_series(1, 2)")
    expect(answers.map(readOnly)).toEqual([["off", "off"], ["on", "on"], ["on", "on"]])
    const many = await threeCalls("SELECT current_setting('transaction_read_only') AS ro FROM generate_series(1, 101)")
    expect(many.map((answer) => new Set(readOnly(answer)))).toEqual([new Set(["off"]), new Set(["off"]), new Set(["off"])])
  })

  it("over 100 rows, or over 1 MiB together, goes the long way and answers every row", async () => {
    const [first, second, third] = await threeCalls("SELECT id FROM bounded ORDER BY id LIMIT 101")
    expect(first!.body.rowCount).toBe(101)
    expect(second!.text).toBe(first!.text)
    expect(third!.text).toBe(first!.text)

    // Three rows of ~600 KB: each small enough, together past the budget.
    const large = await threeCalls("SELECT id, repeat(md5(id::text), 20000) AS blob FROM bounded WHERE id <= 3 ORDER BY id")
    expect(large[0]!.body.rowCount).toBe(3)
    expect((large[0]!.body.rows[2]!["blob"] as string).length).toBe(640_000)
    expect(large[1]!.text).toBe(large[0]!.text)
    expect(large[2]!.text).toBe(large[0]!.text)
  })

  it("a SELECT that writes runs once per call, the long way", async () => {
    const [first, second, third] = await threeCalls("SELECT public.bounded_logged(n) AS n FROM generate_series(1, 3) AS n")
    for (const answer of [first, second, third]) expect(answer!.body.rows).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }])
    const [logged] = await query(stack.db.adminUrl, (sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM public.bounded_log`)
    expect(logged!.n).toBe(9)
  })

  it("an error of the bounded read is the caller's, its position in the caller's text", async () => {
    const text = "SELECT id, nickname FROM bounded_renamed WHERE id <= 3"
    await ddl(stack, "CREATE TABLE public.bounded_renamed (id int, nickname text); INSERT INTO public.bounded_renamed VALUES (1, 'a'), (2, 'b'); GRANT SELECT ON public.bounded_renamed TO member;")
    expect((await run(text)).status).toBe(200)
    expect((await run(text)).status).toBe(200)
    await ddl(stack, "ALTER TABLE public.bounded_renamed RENAME COLUMN nickname TO alias")
    const failed = await sqlRequest<DatabaseErrorBody>(stack.main.url, member.token, text)
    expect(failed.status).toBe(400)
    expect(failed.body.error).toMatchObject({ code: "42703", position: text.indexOf("nickname") + 1 })
  })
})
