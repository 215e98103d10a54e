/**
 * The SQL guard on its own (no database, no HTTP): which statements pass and what they are, the
 * refusal messages, syntax errors with a position, the verdict cache, and two properties — a
 * function call is refused exactly when its name is on the denylist, wherever it stands, and no
 * statement text gets through behind `SELECT 1;`.
 */
import { Effect, Exit, Option } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { type GuardedStatement, isDeniedFunction, makeSqlGuard, StatementRefused } from "../../src/services/SqlGuard.ts"
import { SqlParseError } from "../../src/services/SqlParser.ts"
import { corpus } from "./corpus.ts"

const guard = makeSqlGuard()

const check = (text: string): Promise<GuardedStatement> => Effect.runPromise(guard.check(text))
const failure = (text: string): Promise<StatementRefused | SqlParseError> => Effect.runPromise(Effect.flip(guard.check(text)))
/** The verdict of `text` as the caller would see it: the statement, or the error's tag and message. */
const verdictOf = async (text: string) => {
  const exit = await Effect.runPromise(Effect.exit(guard.check(text)))
  const error = Option.getOrUndefined(Exit.findErrorOption(exit))
  return error === undefined ? { passed: true as const } : { passed: false as const, tag: error._tag, message: error.message }
}

const refusal = async (text: string): Promise<string> => {
  const error = await failure(text)
  expect(error, text).toBeInstanceOf(StatementRefused)
  return error.message
}

describe("what passes", () => {
  it.each([
    ["SELECT 1", { kind: "SELECT", returnsRows: true }],
    ["select * from items where id = $1", { kind: "SELECT", returnsRows: true }],
    ["VALUES (1), (2)", { kind: "SELECT", returnsRows: true }],
    ["TABLE items", { kind: "SELECT", returnsRows: true }],
    ["SELECT 1 UNION ALL SELECT 2", { kind: "SELECT", returnsRows: true }],
    ["WITH x AS (SELECT 1) SELECT * FROM x", { kind: "SELECT", returnsRows: true, writesInCte: false }],
    ["WITH d AS (DELETE FROM items WHERE id = $1 RETURNING *) SELECT * FROM d", { kind: "SELECT", returnsRows: true, writesInCte: true }],
    ["WITH i AS (INSERT INTO items (name) VALUES ('a') RETURNING id) SELECT id FROM i", { kind: "SELECT", returnsRows: true, writesInCte: true }],
    ["SELECT current_setting('app.user_id'), current_user", { kind: "SELECT", returnsRows: true }],
    ["SELECT 1;", { kind: "SELECT", returnsRows: true }],
    ["/* a comment */ SELECT 1 -- another", { kind: "SELECT", returnsRows: true }],
    ["INSERT INTO items (name) VALUES ($1)", { kind: "INSERT", returnsRows: false }],
    ["INSERT INTO items (name) SELECT name FROM items ON CONFLICT DO NOTHING", { kind: "INSERT", returnsRows: false }],
    ["UPDATE items SET name = $1 WHERE id = $2", { kind: "UPDATE", returnsRows: false }],
    ["DELETE FROM items", { kind: "DELETE", returnsRows: false }],
    ["WITH old AS (SELECT id FROM items) DELETE FROM items USING old WHERE items.id = old.id", { kind: "DELETE", returnsRows: false }]
  ] as const)("%s → %o", async (text, expected) => {
    expect(await check(text)).toMatchObject(expected)
  })

  it.each([
    ["INSERT INTO items (name) VALUES ('a') RETURNING id", "INSERT"],
    ["UPDATE items SET name = 'b' RETURNING *", "UPDATE"],
    ["DELETE FROM items WHERE id = 1 RETURNING id", "DELETE"]
  ] as const)("%s returns rows", async (text, kind) => {
    expect(await check(text)).toMatchObject({ kind, returnsRows: true })
  })

  it.each([
    ["SELECT sys.create_table($1, $2::jsonb) AS r", true],
    ["SELECT \"sys\".drop_table('t')", true],
    ["WITH x AS (SELECT sys.create_app('a', 'A', '')) SELECT * FROM x", true],
    ["UPDATE items SET name = 'b' WHERE id IN (SELECT (sys.create_view('v', 'SELECT 1') ->> 'id')::int)", true],
    ["SELECT 1", false],
    ["SELECT * FROM sys.apps", false],
    ["SELECT create_table('t', '[]')", false],
    ["SELECT public.sys('x')", false]
  ] as const)("%s calls a sys function: %s", async (text, callsSys) => {
    expect(await check(text)).toMatchObject({ callsSys })
  })
})

describe("what is refused, and how the refusal reads", () => {
  it.each([
    ["CREATE TABLE x (a int)", "CREATE TABLE statements are not allowed"],
    ["create temp table x (a int)", "CREATE TABLE statements are not allowed"],
    ["CREATE TABLE x AS SELECT 1", "CREATE TABLE AS statements are not allowed"],
    ["SET role owner", "SET statements are not allowed"],
    ["SET ROLE owner", "SET statements are not allowed"],
    ["SET LOCAL app.user_id = 'x'", "SET statements are not allowed"],
    ["SET SESSION AUTHORIZATION postgres", "SET statements are not allowed"],
    ["RESET ALL", "SET statements are not allowed"],
    ["RESET ROLE", "SET statements are not allowed"],
    ["SELECT 1 INTO x", "SELECT INTO statements are not allowed"],
    ["SELECT * INTO TEMP x FROM items", "SELECT INTO statements are not allowed"],
    ["SELECT 1; SELECT 2", "exactly one statement is allowed per request"],
    ["SELECT 1; DROP TABLE items", "exactly one statement is allowed per request"],
    ["SELECT set_config('role', 'owner', true)", "function set_config is not allowed"],
    [`SELECT pg_catalog."set_config"('role', 'owner', true)`, "function set_config is not allowed"],
    ["SELECT SET_CONFIG('app.user_id', 'x', false)", "function set_config is not allowed"],
    ["UPDATE items SET name = set_config('role', 'owner', true)", "function set_config is not allowed"],
    ["SELECT lo_import('/etc/passwd')", "function lo_import is not allowed"],
    ["SELECT pg_read_file('/etc/passwd')", "function pg_read_file is not allowed"],
    ["SELECT dblink_anything('x')", "function dblink_anything is not allowed"],
    ["SELECT pg_advisory_lock(1)", "function pg_advisory_lock is not allowed"],
    // Issue #19: a transaction-level advisory lock held through /sql delayed the rate limiter.
    ["SELECT pg_advisory_xact_lock(1)", "function pg_advisory_xact_lock is not allowed"],
    ["SELECT pg_advisory_xact_lock(1, 2)", "function pg_advisory_xact_lock is not allowed"],
    ["SELECT pg_advisory_xact_lock_shared(1)", "function pg_advisory_xact_lock_shared is not allowed"],
    ["SELECT pg_try_advisory_xact_lock(1)", "function pg_try_advisory_xact_lock is not allowed"],
    ["SELECT pg_catalog.pg_try_advisory_xact_lock_shared(1, 2)", "function pg_try_advisory_xact_lock_shared is not allowed"],
    ["SELECT database_to_xml(true, true, '')", "function database_to_xml is not allowed"],
    ["SELECT database_to_xmlschema(true, true, '')", "function database_to_xmlschema is not allowed"],
    ["SELECT database_to_xml_and_xmlschema(true, true, '')", "function database_to_xml_and_xmlschema is not allowed"],
    ["SELECT schema_to_xml('public', true, true, '')", "function schema_to_xml is not allowed"],
    ["SELECT schema_to_xml_and_xmlschema('public', true, true, '')", "function schema_to_xml_and_xmlschema is not allowed"],
    ["SELECT table_to_xml('items', true, true, '')", "function table_to_xml is not allowed"],
    ["SELECT table_to_xmlschema('items', true, true, '')", "function table_to_xmlschema is not allowed"],
    ["COPY items TO STDOUT", "COPY statements are not allowed"],
    ["DO $$ BEGIN END $$", "DO statements are not allowed"],
    ["CALL p()", "CALL statements are not allowed"],
    ["LISTEN x", "LISTEN statements are not allowed"],
    ["NOTIFY x", "NOTIFY statements are not allowed"],
    ["EXPLAIN ANALYZE DELETE FROM items", "EXPLAIN statements are not allowed"],
    ["TRUNCATE items", "TRUNCATE statements are not allowed"],
    ["GRANT owner TO member", "GRANT statements are not allowed"],
    ["DROP TABLE items", "DROP statements are not allowed"],
    ["CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'", "CREATE FUNCTION statements are not allowed"],
    ["ALTER TABLE items ADD COLUMN x int", "ALTER TABLE statements are not allowed"],
    ["BEGIN", "transaction control statements are not allowed"],
    ["MERGE INTO items USING items s ON false WHEN NOT MATCHED THEN DO NOTHING", "MERGE statements are not allowed"],
    ["WITH m AS (MERGE INTO items USING items s ON false WHEN NOT MATCHED THEN DO NOTHING RETURNING *) SELECT * FROM m", "MERGE statements are not allowed"],
    ["WITH x AS (SELECT 1), m AS (MERGE INTO items USING x ON false WHEN NOT MATCHED THEN DO NOTHING) SELECT * FROM x", "MERGE statements are not allowed"],
    ["SELECT * FROM (WITH m AS (MERGE INTO items USING items s ON false WHEN NOT MATCHED THEN DO NOTHING RETURNING 1) SELECT * FROM m) q", "MERGE statements are not allowed"],
    ["INSERT INTO items (name) WITH m AS (MERGE INTO items USING items s ON false WHEN NOT MATCHED THEN DO NOTHING RETURNING 'x') SELECT * FROM m", "MERGE statements are not allowed"],
    ["  -- only a comment", "sql contains no statement"],
    [";", "sql contains no statement"]
  ])("%j: %s", async (text, message) => {
    expect(await refusal(text)).toBe(message)
  })

  it("a syntax error is a SqlParseError with a 1-based position", async () => {
    const error = await failure("SELEC 1")
    expect(error).toBeInstanceOf(SqlParseError)
    expect(error).toMatchObject({ _tag: "SqlParseError", position: 1, message: expect.stringContaining("syntax error") })
    expect(await failure("SELECT * FORM items")).toMatchObject({ _tag: "SqlParseError", position: 10 })
    // The parser refuses empty text itself (POST /sql never lets it through: sql has a minimum length).
    expect(await failure("")).toBeInstanceOf(SqlParseError)
  })
})

describe("deep statements (issue #19: the guard's recursive walks overflowed the stack)", () => {
  const sum = (terms: number) => `SELECT ${Array.from({ length: terms }, () => "1").join("+")}`
  const nested = (depth: number, inner = "1") => `SELECT ${"abs(".repeat(depth)}${inner}${")".repeat(depth)}`

  it("attack: SELECT 1+1+… with 3,000 terms is judged, not a RangeError", async () => {
    expect(await check(sum(3_000))).toMatchObject({ kind: "SELECT", returnsRows: true, parameters: 0 })
  })

  it("attack: 3,000 nested calls are judged, down to the innermost one", async () => {
    expect(await check(nested(3_000, "$1"))).toMatchObject({ kind: "SELECT", parameters: 1 })
    expect(await refusal(nested(3_000, "set_config('role', 'owner', true)::int"))).toBe("function set_config is not allowed")
  })

  it("a statement too deep for the parser itself is refused, and the parser keeps working after many", async () => {
    for (let i = 0; i < 40; i++) {
      // Each a new text, so that none is answered from the cache.
      expect(await refusal(`${sum(20_000)} + ${i}`)).toBe("the statement is nested too deeply")
      expect(await check(`SELECT ${i} AS n WHERE $1::int > 0`)).toMatchObject({ kind: "SELECT", parameters: 1 })
    }
    expect(await refusal("SELECT set_config('role', 'owner', true)")).toBe("function set_config is not allowed")
  })

  it("nesting past the parser's own limit is a syntax error with a position", async () => {
    expect(await failure(nested(20_000))).toMatchObject({ _tag: "SqlParseError", message: expect.stringContaining("memory exhausted") })
  })
})

describe("the verdict cache", () => {
  it("gives the same verdict for the same text, from the cache", async () => {
    const local = makeSqlGuard()
    const first = await Effect.runPromise(local.check("SELECT 42"))
    expect(await Effect.runPromise(local.check("SELECT 42"))).toBe(first)
    const refused = await Effect.runPromise(Effect.flip(local.check("SET ROLE owner")))
    expect(await Effect.runPromise(Effect.flip(local.check("SET ROLE owner")))).toBe(refused)
    const parseError = await Effect.runPromise(Effect.flip(local.check("SELEC 1")))
    expect(await Effect.runPromise(Effect.flip(local.check("SELEC 1")))).toBe(parseError)
  })

  it("does not let a cached text vouch for a longer one", async () => {
    const local = makeSqlGuard()
    expect(await Effect.runPromise(local.check("SELECT 1"))).toMatchObject({ kind: "SELECT", returnsRows: true })
    const exit = await Effect.runPromise(Effect.exit(local.check("SELECT 1; DROP TABLE items")))
    expect(Exit.isFailure(exit)).toBe(true)
  })

  it("keeps its verdicts right past its size bound", async () => {
    const local = makeSqlGuard()
    for (let i = 0; i < 1_100; i++) await Effect.runPromise(local.check(`SELECT ${i}`))
    expect(await Effect.runPromise(local.check("SELECT 0"))).toMatchObject({ kind: "SELECT", returnsRows: true })
    expect((await Effect.runPromise(Effect.flip(local.check("SET ROLE owner")))).message).toBe("SET statements are not allowed")
  })
})

describe("properties", () => {
  /** Names on the denylist (in any case), names that look like them, and random identifiers. */
  const functionName = fc.oneof(
    fc.constantFrom(
      "set_config", "SET_CONFIG", "Set_Config", "pg_read_file", "pg_ls_dir", "pg_notify", "pg_advisory_lock",
      "pg_terminate_backend", "query_to_xml", "cursor_to_xml", "lo_import", "LO_EXPORT", "lo_whatever", "loread",
      "dblink", "dblink_exec", "DBLINK_something", "set_config_", "xset_config", "lo", "lo__", "pg_advisory_xact_lock",
      "current_setting", "pg_read_files", "now", "lower", "dblin"
    ),
    fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,30}$/)
  )
  const schema = fc.constantFrom("", "pg_catalog.", "public.", "sys.", "\"PG_CATALOG\".")
  const position = fc.constantFrom<(call: string) => string>(
    (call) => `SELECT ${call}`,
    (call) => `SELECT * FROM ${call}`,
    (call) => `WITH c AS (SELECT ${call} AS v) SELECT * FROM c`,
    (call) => `SELECT 1 WHERE EXISTS (SELECT ${call})`,
    (call) => `INSERT INTO t (a) SELECT ${call}`,
    (call) => `UPDATE t SET a = ${call}`,
    (call) => `DELETE FROM t WHERE a = ${call} RETURNING 1`,
    (call) => `SELECT CASE WHEN true THEN COALESCE(NULL, ARRAY[${call}]) END`,
    (call) => `SELECT count(*) FILTER (WHERE ${call} IS NULL) OVER (ORDER BY ${call}) FROM t`
  )

  it("SELECT <f>(1) is refused exactly when f is on the denylist, in any position", async () => {
    await fc.assert(
      fc.asyncProperty(functionName, schema, position, async (name, prefix, at) => {
        const text = at(`${prefix}"${name}"(1)`)
        const verdict = await verdictOf(text)
        expect(verdict, text).toEqual(
          isDeniedFunction(name)
            ? { passed: false, tag: "StatementRefused", message: `function ${name.toLowerCase()} is not allowed` }
            : { passed: true }
        )
      }),
      { numRuns: 400 }
    )
  })

  it("unquoted, the bare SELECT <f>(1) agrees with isDeniedFunction too", async () => {
    await fc.assert(
      fc.asyncProperty(fc.stringMatching(/^(set_|lo_|pg_|dblink|query_to_|x)[a-z0-9_]{0,12}$/), async (name) => {
        const verdict = await verdictOf(`SELECT ${name}(1)`)
        expect(!verdict.passed && verdict.tag === "StatementRefused", name).toBe(isDeniedFunction(name))
      }),
      { numRuns: 300 }
    )
  })

  /** Statement texts: every hostile input, and allowed ones, which must not pass behind another either. */
  const statementText = fc.oneof(
    fc.constantFrom(...corpus.map((entry) => entry.sql)),
    fc.constantFrom("SELECT 2", "INSERT INTO t (a) VALUES (1)", "UPDATE t SET a = 1", "DELETE FROM t", "TABLE t", "VALUES (1)"),
    fc.tuple(fc.constantFrom("SELECT", "DELETE FROM", "TRUNCATE", "DROP TABLE", "LOCK"), fc.stringMatching(/^[a-z_][a-z0-9_]{0,20}$/))
      .map(([verb, name]) => (verb === "SELECT" ? `SELECT "${name}"` : `${verb} "${name}"`))
  )
  const separator = fc.constantFrom(";", "; ", ";\n", " ;\t", ";/* ; */", "; -- ;\n", ";;")

  it("any statement behind `SELECT 1;` is refused", async () => {
    await fc.assert(
      fc.asyncProperty(statementText, separator, async (text, between) => {
        const wrapped = `SELECT 1${between}${text}`
        const verdict = await verdictOf(wrapped)
        expect(verdict.passed, wrapped).toBe(false)
        // Text that parses on its own is refused for being a second statement.
        const alone = await verdictOf(text)
        if (alone.passed || alone.tag !== "SqlParseError") {
          expect(verdict, wrapped).toEqual({ passed: false, tag: "StatementRefused", message: "exactly one statement is allowed per request" })
        }
      }),
      { numRuns: 400 }
    )
  })
})

describe("parameters", () => {
  it.each([
    ["SELECT 1", 0],
    ["SELECT $1", 1],
    ["SELECT $2, $1", 2],
    ["WITH x AS (SELECT $3 AS a) SELECT * FROM x WHERE a = $1", 3]
  ] as const)("%s uses %i", async (text, parameters) => {
    expect(await check(text)).toMatchObject({ parameters })
  })
})

describe("page sources (checked against the page format before the statement runs: test/pages/PageValidation)", () => {
  it.each([
    ["SELECT sys.create_page('a', 't', '# Hi')", [{ literal: "# Hi" }]],
    ["SELECT sys.create_page($1, $2, $3::text)", [{ parameter: 3 }]],
    ["SELECT * FROM sys.update_page(p_source => $1, p_slug => 'a', p_title => NULL)", [{ parameter: 1 }]],
    ["SELECT sys.update_page('a', 'b', 'one'), sys.create_page('c', 'd', $1)", [{ literal: "one" }, { parameter: 1 }]],
    ["SELECT sys.create_page('a', 't', '')", [{ literal: "" }]]
  ] as const)("%s passes its sources on", async (text, pageSources) => {
    expect(await check(text)).toMatchObject({ kind: "SELECT", pageSources })
  })

  it.each([
    "SELECT sys.update_page('a', 't', NULL)",
    "SELECT sys.update_page(p_slug => 'a', p_title => 't')",
    "SELECT sys.delete_page('a')",
    "SELECT 1"
  ])("%s has none", async (text) => {
    expect((await check(text)).pageSources).toBeUndefined()
  })

  it.each([
    "SELECT sys.create_page('a', 't', 'x' || 'y')",
    "SELECT sys.create_page('a', 't', s) FROM (VALUES ('x')) v(s)",
    "SELECT sys.update_page(p_slug => 'a', p_source => (SELECT 'x'))"
  ])("%s is refused: the source must be a literal or a parameter", async (text) => {
    expect(await refusal(text)).toMatch(/^pass the page source of sys.create_page \/ sys.update_page as a string literal or a \$n parameter/)
  })

  it.each([
    "SELECT sys.create_page('a', 't', $1::text[]::text)",
    "SELECT sys.create_page('a', 't', '{x}'::text[]::text)",
    "SELECT sys.create_page('a', 't', $1::varchar(5))",
    "SELECT sys.create_page('a', 't', $1::name)",
    "SELECT sys.create_page('a', 't', N'x')",
    "SELECT sys.update_page('a', 't', $1::json::text)"
  ])("attack: a cast to another type changed the checked source on its way in (%s)", async (text) => {
    expect(await refusal(text)).toMatch(/^pass the page source of sys.create_page \/ sys.update_page as a string literal or a \$n parameter/)
  })

  it.each([
    "SELECT $1::name IS NOT NULL, sys.create_page('a', 't', $1)",
    "SELECT sys.create_page('a', 't', $1) WHERE $1::char(3) IS NOT NULL",
    "SELECT sys.create_page($1, 't', $1)"
  ])("attack: a page source's $n typed elsewhere in the statement was saved as its cast (%s)", async (text) => {
    expect(await refusal(text)).toBe("a $n that passes a page source to sys.create_page / sys.update_page may not be used elsewhere in the statement")
  })

  it.each([
    ["SELECT sys.create_page('a', 't', $1::pg_catalog.text)", [{ parameter: 1 }]],
    ["SELECT sys.create_page('a', 't', text '# Hi'::text)", [{ literal: "# Hi" }]],
    ["SELECT sys.create_page('a', 't', U&'\\0023 Hi')", [{ literal: "# Hi" }]]
  ] as const)("a cast to text keeps the source as written (%s)", async (text, pageSources) => {
    expect(await check(text)).toMatchObject({ pageSources })
  })

  it.each([
    "SELECT plinth.sys.create_page('a', 't', 'x')",
    "SELECT * FROM \"plinth\".\"sys\".update_page('a', 't', 'x')",
    "SELECT plinth.sys.drop_table('items')",
    "SELECT plinth.public.f()",
    // PostgreSQL refuses a database other than its own, but the guard cannot tell which is its own.
    "SELECT other.sys.create_table('t')"
  ])("attack: a function named with the database's name (%s) hid a sys call from the guard", async (text) => {
    expect(await refusal(text)).toMatch(/^function \w+\.\w+\.\w+: write the function as schema\.name, without the database's name$/)
  })
})
