/**
 * Issue #19, finding 9: results the driver could not carry. Rows over the driver's 16 MiB message
 * limit, types it handed over as raw binary, composite values it read as UTF-8: each now has a
 * JSON form (compared with PostgreSQL's own text rendering where it is text) or is a clear 400
 * asking for a cast to text, and the response bound still holds.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, type SignIn, signedIn, startAuthStack } from "../support/auth.ts"
import { alterTable, createTable } from "../schema/helpers.ts"
import { ddl, type PlainErrorBody, type SqlResult, sqlRequest } from "./fixtures.ts"

const MiB = 1024 * 1024
// Above the driver's former 16 MiB message limit, so that a 17 MiB row is within it and a 21 MiB one is not.
const MAX_RESPONSE_BYTES = 20 * MiB

let stack: AuthStack
let member: SignIn

beforeAll(async () => {
  stack = await startAuthStack({ SQL_MAX_RESPONSE_BYTES: String(MAX_RESPONSE_BYTES) })
  await ddl(stack, `
    CREATE TYPE public.pair AS (n int, label text);
    CREATE TYPE public.feeling AS ENUM ('calm', 'glad');
    CREATE TYPE public.outer_pair AS (inner_pair pair, big bigint, at timestamptz, doc jsonb, tags text[], mood feeling, gone int);
    ALTER TYPE public.outer_pair DROP ATTRIBUTE gone;
    CREATE TYPE public.ranged AS (r int4range);
    CREATE TABLE public.shelf (id int PRIMARY KEY, name text, price numeric(10, 2), "__proto__" text);
    INSERT INTO public.shelf VALUES (1, 'jar', 2.50, 'p'), (2, 'lid', NULL, NULL);
    GRANT SELECT ON public.shelf TO member;
    GRANT USAGE ON TYPE public.pair, public.feeling, public.outer_pair, public.ranged TO member
  `)
  member = await signedIn(stack, "member@plinth.test", "member")
})
afterAll(() => stack?.close())

const run = <T = SqlResult>(sql: string, params?: ReadonlyArray<unknown>) => sqlRequest<T>(stack.main.url, member.token, sql, params)

describe("finding 9: rows larger than the driver's message limit", () => {
  it("attack: a 17 MiB row was answered 503 database unavailable; within the bound it comes back whole", async () => {
    const response = await run<SqlResult<{ v: string }>>(`SELECT repeat('x', ${17 * MiB}) AS v`)
    expect(response.status).toBe(200)
    expect(response.body.rows[0]!.v.length).toBe(17 * MiB)
    // Several rows the long way too.
    const rows = await run<SqlResult<{ n: number; v: string }>>(`SELECT n, repeat('y', ${6 * MiB}) AS v FROM generate_series(1, 2) AS n`)
    expect(rows.status).toBe(200)
    expect(rows.body.rows.map((row) => row.v.length)).toEqual([6 * MiB, 6 * MiB])
  })

  it("a row over SQL_MAX_RESPONSE_BYTES is still 400, on the wire or once written as JSON, and the pool is unharmed", async () => {
    const tooLarge = { error: `the result is larger than ${MAX_RESPONSE_BYTES} bytes; select fewer rows or columns` }
    const overOnTheWire = await run<PlainErrorBody>(`SELECT repeat('x', ${21 * MiB}) AS v`)
    expect(overOnTheWire.status).toBe(400)
    expect(overOnTheWire.body).toEqual(tooLarge)
    // 19 MiB on the wire, 38 MiB as JSON: every quote is escaped.
    const overAsJson = await run<PlainErrorBody>(`SELECT repeat('"', ${19 * MiB}) AS v`)
    expect(overAsJson.status).toBe(400)
    expect(overAsJson.body).toEqual(tooLarge)
    const overTheLongWay = await run<PlainErrorBody>(`SELECT n, repeat('x', ${21 * MiB}) AS v FROM generate_series(1, 2) AS n`)
    expect(overTheLongWay.status).toBe(400)
    expect(overTheLongWay.body).toEqual(tooLarge)
    expect((await run("SELECT 1 AS one")).body).toEqual({ rows: [{ one: 1 }], rowCount: 1 })
  })
})

describe("finding 9: types the driver handed over as raw binary", () => {
  // Each value beside PostgreSQL's own text rendering of it.
  const textual: ReadonlyArray<readonly [string, string]> = [
    ["tid", "'(4294967295,65535)'::tid"],
    ["tid_small", "'(0,1)'::tid"],
    ["xid", "'4294967295'::xid"],
    ["xid8", "'18446744073709551615'::xid8"],
    ["cid", "'7'::cid"],
    ["lsn", "'16/B374D848'::pg_lsn"],
    ["lsn_small", "'0/1'::pg_lsn"],
    ["oids", "'1 2 4294967295'::oidvector"],
    ["oids_empty", "''::oidvector"],
    ["int2s", "'1 -2 3'::int2vector"],
    ["letter", "'a'::\"char\""],
    ["letter_high", "'\\351'::\"char\""],
    ["letter_empty", "''::\"char\""],
    ["path", "'$.a[*] ? (@ > 1)'::jsonpath"],
    ["snapshot", "'10:20:10,14,15'::pg_snapshot"],
    ["snapshot_empty", "'10:10:'::txid_snapshot"],
    ["markup", "'<a>é</a>'::xml"]
  ]

  it("attack: tid, xid, xid8, pg_lsn and oidvector came back as raw binary strings; they are text as PostgreSQL prints them", async () => {
    const text = `SELECT ${textual.map(([name, expression]) => `${expression} AS ${name}, (${expression})::text AS ${name}_text`).join(",\n  ")}`
    const response = await run(text)
    expect(response.status).toBe(200)
    const row = response.body.rows[0]!
    for (const [name, expression] of textual) {
      expect(typeof row[`${name}_text`], expression).toBe("string")
      expect(row[name], expression).toBe(row[`${name}_text`])
    }
    expect(row["tid"]).toBe("(4294967295,65535)")
    expect(row["xid8"]).toBe("18446744073709551615")
    expect(row["oids"]).toBe("1 2 4294967295")
  })

  it("arrays of them are arrays of the same text", async () => {
    const response = await run("SELECT array['(0,1)'::tid, '(2,3)'] AS tids, array['1'::xid, null] AS xids, array['0/1'::pg_lsn] AS lsns")
    expect(response.status).toBe(200)
    expect(response.body.rows).toEqual([{ tids: ["(0,1)", "(2,3)"], xids: ["1", null], lsns: ["0/1"] }])
  })

  // The binary form of a reg* value is its OID alone; its name depends on the catalog and the
  // search path, which only PostgreSQL's own rendering (a cast to text) gets right.
  it.each([
    ["'member'::regrole", "regrole"],
    ["'pg_class'::regclass", "regclass"],
    ["'now'::regproc", "regproc"],
    ["'now()'::regprocedure", "regprocedure"],
    ["'||/'::regoper", "regoper"],
    ["'+(int4,int4)'::regoperator", "regoperator"],
    ["'int4'::regtype", "regtype"],
    ["'public'::regnamespace", "regnamespace"],
    ["'simple'::regconfig", "regconfig"],
    ["'simple'::regdictionary", "regdictionary"],
    ["'\"C\"'::regcollation", "regcollation"]
  ])("attack: %s came back as raw binary; it is 400 asking for a cast to text", async (expression, type) => {
    const response = await run(`SELECT ${expression} AS v`)
    expect(response.status).toBe(400)
    expect(response.body).toEqual({ error: `a column of type ${type} has no JSON form; cast it to text` })
    const cast = await run<SqlResult<{ v: string }>>(`SELECT (${expression})::text AS v`)
    expect(cast.status).toBe(200)
    expect(typeof cast.body.rows[0]!.v).toBe("string")
  })
})

describe("finding 9: composite values", () => {
  it("attack: a composite value was answered 400 Invalid UTF-8; it comes back as an object keyed by attribute", async () => {
    const response = await run("SELECT (1, 'a')::pair AS p, (null, null)::pair AS empty, null::pair AS none")
    expect(response.status).toBe(200)
    expect(response.body.rows).toEqual([{ p: { n: 1, label: "a" }, empty: { n: null, label: null }, none: null }])
  })

  it("attack: select t from t gave garbage; each row is an object, each attribute converted like a column", async () => {
    const response = await run("SELECT s FROM shelf AS s ORDER BY id")
    expect(response.status).toBe(200)
    expect(JSON.parse(JSON.stringify(response.body.rows))).toEqual([
      { s: JSON.parse('{"id": 1, "name": "jar", "price": "2.50", "__proto__": "p"}') },
      { s: JSON.parse('{"id": 2, "name": "lid", "price": null, "__proto__": null}') }
    ])
  })

  it("nested composites, arrays of composites and dropped attributes", async () => {
    const response = await run(`
      SELECT ROW((2, 'b')::pair, 9007199254740993, '2026-01-02 03:04:05+00', '{"k": [1]}', array['x', null], 'glad')::outer_pair AS o,
             array[(1, 'a')::pair, null, (3, null)::pair] AS pairs,
             array['calm'::feeling, 'glad'] AS moods,
             array_agg(s ORDER BY s.id) AS shelves
      FROM shelf AS s`)
    expect(response.status).toBe(200)
    const row = response.body.rows[0]!
    expect(row["o"]).toEqual({
      inner_pair: { n: 2, label: "b" },
      big: "9007199254740993",
      at: "2026-01-02T03:04:05Z",
      doc: { k: [1] },
      tags: ["x", null],
      mood: "glad"
    })
    expect(row["pairs"]).toEqual([{ n: 1, label: "a" }, null, { n: 3, label: null }])
    expect(row["moods"]).toEqual(["calm", "glad"])
    expect((row["shelves"] as ReadonlyArray<{ name: string }>).map((shelf) => shelf.name)).toEqual(["jar", "lid"])
  })

  it("a view's rows whose attributes are of domains (information_schema) are objects too", async () => {
    const response = await run("SELECT t FROM information_schema.tables AS t WHERE table_name = 'shelf'")
    expect(response.status).toBe(200)
    expect(response.body.rows[0]!["t"]).toMatchObject({ table_schema: "public", table_name: "shelf", table_type: "BASE TABLE" })
  })

  it("a table created or altered after the first statement: its rows are objects with its attributes as they are now", async () => {
    const owner = await signedIn(stack, "owner@plinth.test", "owner")
    const asOwner = <T = SqlResult>(sql: string) => sqlRequest<T>(stack.main.url, owner.token, sql)
    expect((await asOwner("SELECT 1 AS warm")).status).toBe(200)
    expect((await createTable(stack, owner, "notes", [{ name: "title", type: "text" }])).status).toBe(200)
    expect((await asOwner("INSERT INTO notes (title) VALUES ('first')")).status).toBe(200)
    const created = await asOwner("SELECT n FROM notes AS n")
    expect(created.status).toBe(200)
    expect(created.body.rows[0]!["n"]).toMatchObject({ title: "first" })
    expect((await alterTable(stack, owner, "notes", [{ op: "add_column", column: { name: "pages", type: "integer" } }])).status).toBe(200)
    const altered = await asOwner("SELECT n FROM notes AS n")
    expect(altered.status).toBe(200)
    expect(altered.body.rows[0]!["n"]).toMatchObject({ title: "first", pages: null })
  })
})

describe("finding 9: types without a JSON form", () => {
  it.each([
    ["ROW(1, 'a')", "record"],
    ["array[int4range(1, 2)]", "int4range"],
    ["ROW(int4range(1, 2))::ranged", "int4range"]
  ])("%s is 400 with the cast hint, not garbled bytes", async (expression, type) => {
    const response = await run<PlainErrorBody>(`SELECT ${expression} AS v`)
    expect(response.status).toBe(400)
    expect(response.body.error).toContain(`type ${type}`)
    expect(response.body.error).toContain("cast it to text")
    expect((await run(`SELECT (${expression})::text AS v`)).status).toBe(200)
  })
})
