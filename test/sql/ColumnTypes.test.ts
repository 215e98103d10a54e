/**
 * How result columns become JSON (src/services/JsonColumnTypes.ts), through POST /sql: one
 * SELECT with every type of the mapping table and exact expected values, then random intervals
 * and timestamps compared with PostgreSQL's own ISO 8601 rendering of the same values.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, type SignIn, signedIn, startAuthStack } from "../support/auth.ts"
import { runSql } from "../support/database.ts"
import { ddl, type SqlResult, sqlRequest } from "./fixtures.ts"

let stack: AuthStack
let member: SignIn

beforeAll(async () => {
  stack = await startAuthStack()
  await ddl(stack, "CREATE TYPE public.mood AS ENUM ('sad', 'happy'); GRANT USAGE ON TYPE public.mood TO member")
  member = await signedIn(stack, "member@plinth.test", "member")
})
afterAll(() => stack?.close())

const run = <T = SqlResult>(sql: string, params?: ReadonlyArray<unknown>) => sqlRequest<T>(stack.main.url, member.token, sql, params)

/** Runs `text` as the superuser in a transaction where `settings` apply (for PostgreSQL's own renderings). */
const asSuperuser = <Row extends object>(text: string, settings: Record<string, string>) =>
  runSql(stack.db.adminUrl, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql.withTransaction(Effect.gen(function*() {
      for (const [name, value] of Object.entries(settings)) yield* sql`SELECT set_config(${name}, ${value}, true)`
      return yield* sql.unsafe<Row>(text)
    }))
  }))

describe("the mapping table, value by value", () => {
  const columns: ReadonlyArray<readonly [string, string, unknown]> = [
    // bigint: strings, exact beyond 2^53
    ["big", "9007199254740993::bigint", "9007199254740993"],
    ["big_min", "(-9223372036854775807 - 1)::bigint", "-9223372036854775808"],
    ["big_max", "9223372036854775807::bigint", "9223372036854775807"],
    ["big_small", "-42::bigint", "-42"],
    // numeric: strings, exact, with the column's scale
    ["num", "1.50::numeric", "1.50"],
    ["num_scaled", "3::numeric(10, 2)", "3.00"],
    ["num_long", "'12345678901234567890.000000000001'::numeric", "12345678901234567890.000000000001"],
    ["num_negative", "-0.001::numeric", "-0.001"],
    ["num_nan", "'NaN'::numeric", "NaN"],
    // timestamp: ISO 8601 without offset, microseconds, trailing zeros dropped
    ["ts", "'2026-11-22 03:00:42.870123'::timestamp", "2026-11-22T03:00:42.870123"],
    ["ts_whole", "'2026-11-22 03:00:42'::timestamp", "2026-11-22T03:00:42"],
    ["ts_tenth", "'2026-11-22 03:00:42.5'::timestamp", "2026-11-22T03:00:42.5"],
    ["ts_micro", "'2026-11-22 03:00:42.000001'::timestamp", "2026-11-22T03:00:42.000001"],
    ["ts_before_2000", "'1999-12-31 23:59:59.999999'::timestamp", "1999-12-31T23:59:59.999999"],
    ["ts_before_1970", "'1969-07-20 20:17:40.25'::timestamp", "1969-07-20T20:17:40.25"],
    ["ts_year_1", "'0001-01-01 00:00:00'::timestamp", "0001-01-01T00:00:00"],
    ["ts_infinity", "'infinity'::timestamp", "infinity"],
    ["ts_minus_infinity", "'-infinity'::timestamp", "-infinity"],
    // timestamptz: ISO 8601 in UTC with Z, whatever the offset written
    ["tstz", "'2026-11-22 04:00:42.870123+01'::timestamptz", "2026-11-22T03:00:42.870123Z"],
    ["tstz_whole", "'2026-01-01 00:00:00+00'::timestamptz", "2026-01-01T00:00:00Z"],
    ["tstz_infinity", "'infinity'::timestamptz", "infinity"],
    ["tstz_minus_infinity", "'-infinity'::timestamptz", "-infinity"],
    // date and time
    ["day", "'2026-11-22'::date", "2026-11-22"],
    ["day_old", "'1901-02-03'::date", "1901-02-03"],
    ["clock", "'04:05:06.5'::time", "04:05:06.5"],
    ["clock_whole", "'23:59:59'::time", "23:59:59"],
    ["clock_micro", "'00:00:00.000001'::time", "00:00:00.000001"],
    ["clock_midnight", "'00:00'::time", "00:00:00"],
    // interval: ISO 8601 durations
    ["span", "interval '1 year 2 months 3 days 04:05:06.5'", "P1Y2M3DT4H5M6.5S"],
    ["span_negative", "interval '-1 day -02:00:00'", "P-1DT-2H"],
    ["span_negative_months", "interval '-1 year -2 months'", "P-1Y-2M"],
    ["span_negative_seconds", "interval '-1.5 seconds'", "PT-1.5S"],
    ["span_mixed", "interval '1 day -1 hour'", "P1DT-1H"],
    ["span_zero", "interval '0'", "PT0S"],
    ["span_micro", "interval '0.000001 seconds'", "PT0.000001S"],
    ["span_long", "interval '100 hours'", "PT100H"],
    // bytea: \x + hex
    ["bytes", "'\\xdeadbeef'::bytea", "\\xdeadbeef"],
    ["bytes_empty", "''::bytea", "\\x"],
    ["bytes_all", "'\\x00ff10'::bytea", "\\x00ff10"],
    // json, jsonb: JSON as stored
    ["doc_json", "'{\"a\": [1, 2.5, null], \"b\": {\"c\": true}}'::json", { a: [1, 2.5, null], b: { c: true } }],
    ["doc_jsonb", "'{\"b\": 1, \"a\": \"x\"}'::jsonb", { a: "x", b: 1 }],
    ["doc_array", "'[1, \"two\", [3]]'::jsonb", [1, "two", [3]]],
    ["doc_string", "'\"just text\"'::jsonb", "just text"],
    ["doc_number", "'12.5'::jsonb", 12.5],
    // uuid, text, enum: strings
    ["id", "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"],
    ["label", "'héllo \"world\" \\ ✓'::text", "héllo \"world\" \\ ✓"],
    ["label_varchar", "'abc'::varchar(10)", "abc"],
    ["label_char", "'ab'::char(4)", "ab  "],
    ["feeling", "'happy'::mood", "happy"],
    // numbers and booleans
    ["int4", "2147483647::int", 2147483647],
    ["int2", "-7::smallint", -7],
    ["float8", "1.5::float8", 1.5],
    ["float8_small", "0.1::float8", 0.1],
    ["float4", "0.25::real", 0.25],
    ["yes", "true", true],
    ["no", "false", false],
    // arrays of any of these
    ["bigints", "array[1, 2]::bigint[]", ["1", "2"]],
    ["bigints_big", "array[9007199254740993, null]::bigint[]", ["9007199254740993", null]],
    ["ints", "array[1, null, 3]::int[]", [1, null, 3]],
    ["ints_empty", "'{}'::int[]", []],
    ["texts", "array['a', 'b c', null, '{}', '\"q\"']::text[]", ["a", "b c", null, "{}", "\"q\""]],
    ["numerics", "array[1.50, 2]::numeric[]", ["1.50", "2"]],
    ["stamps", "array['2026-01-02 03:04:05.123456+00', '2026-01-02 04:04:05+01']::timestamptz[]", ["2026-01-02T03:04:05.123456Z", "2026-01-02T03:04:05Z"]],
    ["stamps_local", "array['2026-01-02 03:04:05.5']::timestamp[]", ["2026-01-02T03:04:05.5"]],
    ["days", "array['2026-01-02'::date]", ["2026-01-02"]],
    ["spans", "array[interval '1 day', interval '-1 minute']", ["P1D", "PT-1M"]],
    ["byteas", "array['\\x01'::bytea, '\\x'::bytea]", ["\\x01", "\\x"]],
    ["uuids", "array['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid]", ["a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"]],
    ["jsons", "array['{\"a\": 1}'::jsonb, '[2]'::jsonb]", [{ a: 1 }, [2]]],
    ["bools", "array[true, false, null]", [true, false, null]],
    // null of any type
    ["null_int", "null::int", null],
    ["null_bigint", "null::bigint", null],
    ["null_timestamptz", "null::timestamptz", null],
    ["null_interval", "null::interval", null],
    ["null_bytea", "null::bytea", null],
    ["null_jsonb", "null::jsonb", null],
    ["null_array", "null::bigint[]", null]
  ]

  it("one SELECT of every type answers exactly the documented JSON", async () => {
    const text = `SELECT ${columns.map(([name, expression]) => `${expression} AS ${name}`).join(",\n  ")}`
    const response = await run(text)
    expect(response.status).toBe(200)
    expect(response.body.rowCount).toBe(1)
    const row = response.body.rows[0]!
    expect(Object.keys(row)).toEqual(columns.map(([name]) => name))
    for (const [name, expression, expected] of columns) expect(row[name], `${name}: ${expression}`).toEqual(expected)
  })

  // The driver reads one-dimensional arrays only; deeper ones are refused with a way out.
  it("multi-dimensional arrays are 400 with a hint to cast, and the connection pool is unharmed", async () => {
    const response = await run("SELECT '{{1,2},{3,4}}'::int[] AS ints")
    expect(response.status).toBe(400)
    expect(response.body).toEqual({ error: expect.stringContaining("cast it to text") })
    const cast = await run("SELECT '{{1,2},{3,4}}'::int[]::text AS ints")
    expect(cast.body).toEqual({ rows: [{ ints: "{{1,2},{3,4}}" }], rowCount: 1 })
  })

  it.each([
    ["int4range(1, 5)", "int4range"],
    ["point(1, 2)", "point"],
    ["'12.50'::money", "money"],
    ["to_tsvector('simple', 'a b')", "tsvector"],
    ["'08:00:2b:01:02:03'::macaddr", "macaddr"]
  ])("%s is 400 naming its type (%s), not garbled bytes", async (expression, type) => {
    const response = await run(`SELECT ${expression} AS v`)
    expect(response.status).toBe(400)
    expect(response.body).toEqual({ error: `a column of type ${type} has no JSON form; cast it to text` })
    expect((await run(`SELECT (${expression})::text AS v`)).status).toBe(200)
  })

  // Documented limit (README "Result types"): json values are parsed and written again, so a number
  // beyond double precision is rounded like any JSON number in JavaScript.
  it("json numbers beyond double precision are rounded; as text they keep every digit", async () => {
    const response = await run("SELECT '{\"n\": 12345678901234567890}'::jsonb AS b, '{\"n\": 12345678901234567890}'::jsonb::text AS t")
    expect(response.status).toBe(200)
    expect(response.body.rows[0]!["t"]).toBe('{"n": 12345678901234567890}')
  })

  it("the same values come back from a table, and as parameters they go in unchanged", async () => {
    const response = await run(
      `SELECT $1::bigint AS big, $2::numeric AS num, $3::timestamptz AS tstz, $4::timestamp AS ts, $5::interval AS span,
              $6::bytea AS bytes, $7::date AS day, $8::time AS clock, $9::uuid AS id`,
      [
        "9007199254740993",
        "12345678901234567890.000000000001",
        "2026-11-22T03:00:42.870123Z",
        "2026-11-22T03:00:42.870123",
        "P1Y2M3DT4H5M6.5S",
        "\\xdeadbeef",
        "2026-11-22",
        "04:05:06.5",
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
      ]
    )
    expect(response.status).toBe(200)
    expect(response.body).toEqual({
      rows: [{
        big: "9007199254740993",
        num: "12345678901234567890.000000000001",
        tstz: "2026-11-22T03:00:42.870123Z",
        ts: "2026-11-22T03:00:42.870123",
        span: "P1Y2M3DT4H5M6.5S",
        bytes: "\\xdeadbeef",
        day: "2026-11-22",
        clock: "04:05:06.5",
        id: "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
      }],
      rowCount: 1
    })
  })
})

describe("against PostgreSQL's own renderings", () => {
  const MICROS_PER_DAY = 86_400_000_000

  it("random intervals render as PostgreSQL's intervalstyle iso_8601 does", async () => {
    const interval = fc.record({
      months: fc.integer({ min: -2_000, max: 2_000 }),
      days: fc.integer({ min: -20_000, max: 20_000 }),
      micros: fc.oneof(
        fc.integer({ min: -1_000_000_000_000, max: 1_000_000_000_000 }),
        fc.integer({ min: -10_000_000, max: 10_000_000 }),
        fc.constantFrom(0, 1, -1, 500_000, -500_000)
      )
    })
    await fc.assert(
      fc.asyncProperty(fc.array(interval, { minLength: 1, maxLength: 30 }), async (spans) => {
        const values = spans.map(({ months, days, micros }, index) =>
          `(${index}, interval '${months} months ${days} days ${micros} microseconds')`).join(", ")
        const text = `SELECT i, v FROM (VALUES ${values}) AS t(i, v) ORDER BY i`
        const response = await run<SqlResult<{ i: number; v: string }>>(text)
        expect(response.status).toBe(200)
        const expected = await asSuperuser<{ i: number; v: string }>(text.replace("SELECT i, v", "SELECT i, v::text AS v"), {
          intervalstyle: "iso_8601"
        })
        expect(response.body).toEqual({ rows: expected.map((row) => ({ i: row.i, v: row.v })), rowCount: spans.length })
      }),
      { numRuns: 10 }
    )
  })

  it("random timestamps and timestamptz render as PostgreSQL's to_json does (in UTC)", async () => {
    // 0001-01-01 to 9999-12-31, in microseconds since 2000-01-01.
    const micros = fc.oneof(
      fc.bigInt({ min: -730_119n * BigInt(MICROS_PER_DAY), max: 2_914_603n * BigInt(MICROS_PER_DAY) }),
      fc.bigInt({ min: -100n * BigInt(MICROS_PER_DAY), max: 100n * BigInt(MICROS_PER_DAY) })
    )
    await fc.assert(
      fc.asyncProperty(fc.array(micros, { minLength: 1, maxLength: 30 }), async (stamps) => {
        const values = stamps.map((us, index) =>
          `(${index}, timestamp '2000-01-01' + ${us} * interval '1 microsecond')`).join(", ")
        const text = `SELECT i, v AS ts, (v AT TIME ZONE 'UTC') AS tstz FROM (VALUES ${values}) AS t(i, v) ORDER BY i`
        const response = await run<SqlResult<{ i: number; ts: string; tstz: string }>>(text)
        expect(response.status).toBe(200)
        const expected = await asSuperuser<{ i: number; ts: string; tstz: string }>(
          `SELECT i, to_json(v) #>> '{}' AS ts, to_json(v AT TIME ZONE 'UTC') #>> '{}' AS tstz FROM (VALUES ${values}) AS t(i, v) ORDER BY i`,
          { TimeZone: "UTC" }
        )
        expect(response.body).toEqual({
          rows: expected.map((row) => ({ i: row.i, ts: row.ts, tstz: row.tstz.replace(/\+00:00$/, "Z") })),
          rowCount: stamps.length
        })
      }),
      { numRuns: 10 }
    )
  })

  it("random times of day render as PostgreSQL prints them", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 0, max: MICROS_PER_DAY }), { minLength: 1, maxLength: 30 }), async (times) => {
        const values = times.map((us, index) => `(${index}, time '00:00' + ${us} * interval '1 microsecond')`).join(", ")
        // time + interval wraps at midnight; 24:00:00 itself is a valid time, written directly.
        const fixed = values.replace(`time '00:00' + ${MICROS_PER_DAY} * interval '1 microsecond'`, "time '24:00:00'")
        const text = `SELECT i, v FROM (VALUES ${fixed}) AS t(i, v) ORDER BY i`
        const response = await run<SqlResult<{ i: number; v: string }>>(text)
        expect(response.status).toBe(200)
        const expected = await asSuperuser<{ i: number; v: string }>(text.replace("SELECT i, v", "SELECT i, v::text AS v"), {})
        expect(response.body).toEqual({ rows: expected.map((row) => ({ i: row.i, v: row.v })), rowCount: times.length })
      }),
      { numRuns: 5 }
    )
  })
})
