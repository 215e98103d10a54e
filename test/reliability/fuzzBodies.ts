/**
 * Generators of hostile HTTP requests for the fuzz suite (Fuzz.test.ts): JSON bodies with the
 * right keys and wrong values, arbitrary JSON, deep nesting, non-JSON bytes, odd content types,
 * bodies around the 1 MiB limit, and random Authorization / X-App-Schema / X-Tenant headers.
 *
 * Bodies are built as JSON *text*, never as objects serialised by JSON.stringify at the end: a
 * body 10,000 levels deep would overflow this process's stack before it reached the server.
 */
import fc from "fast-check"

export interface FuzzRequest {
  /** The generator that made the body, for the per-kind summary and failure reports. */
  readonly kind: string
  readonly method: "GET" | "POST" | "DELETE"
  readonly path: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string | Uint8Array | undefined
}

export const MIB = 1024 * 1024

// ---------------------------------------------------------------------------------------------
// Strings

const char = (from: number, to: number) => fc.integer({ min: from, max: to }).map((code) => String.fromCharCode(code))

/** Any UTF-16 code unit: NUL, controls, lone surrogates, BOM, private use, everything. */
const anyCodeUnit = char(0, 0xffff)

/** Strings that tend to break things, whatever the field. */
const SPECIAL_STRINGS = [
  "", " ", "\t", "\n", "\r\n", "\u0000", "a\u0000b", "\ud800", "\udfff", "a\udc00b", "\ud83d", "\ufeff", "\uffff", "\u202e",
  "null", "undefined", "true", "false", "0", "-1", "1e309", "NaN", "Infinity", "[]", "{}", "\"", "\\", "'", "''", "%00", "%",
  "' OR '1'='1", "'; DROP TABLE sys.users; --", "$1", "$$", "E'\\\\x00'", "\\x00", "../../etc/passwd", "${7*7}", "{{7*7}}",
  "<script>alert(1)</script>", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "👩‍👩‍👧‍👦", "é", "e\u0301", "ﬃ", "İ", "ß",
  "a@b", "@", "a@", "@b", "a@b@c", "a @b.c", "fuzz-owner@plinth.test", "FUZZ-OWNER@PLINTH.TEST", "f.u.z.z+tag@plinth.test",
  "owner", "admin", "staff", "member", "anon", "postgres", "authenticator", "none", "public", "sys", "pg_catalog"
]

export const nastyString: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.string({ maxLength: 40 }), weight: 4 },
  { arbitrary: fc.string({ unit: "binary", maxLength: 40 }), weight: 3 },
  { arbitrary: fc.string({ unit: anyCodeUnit, maxLength: 40 }), weight: 3 },
  { arbitrary: fc.constantFrom(...SPECIAL_STRINGS), weight: 3 }
)

/** 1 KB to ~200 KB of a repeated random unit (cut anywhere, so possibly a lone surrogate at the end). */
export const hugeString: fc.Arbitrary<string> = fc.record({
  unit: fc.oneof(fc.constantFrom("x", "é", "\u0000", "😀", "\\", "\"", "\ud800"), fc.string({ unit: anyCodeUnit, minLength: 1, maxLength: 6 })),
  size: fc.oneof(fc.integer({ min: 1_000, max: 20_000 }), fc.integer({ min: 20_000, max: 200_000 }))
}).map(({ unit, size }) => unit.repeat(Math.ceil(size / unit.length)).slice(0, size))

/** A value that can go into a header (fetch refuses anything but visible Latin-1 and tabs). */
export const headerValue = (maxLength: number): fc.Arbitrary<string> =>
  fc.oneof(
    { arbitrary: fc.string({ unit: char(0x21, 0x7e), minLength: 1, maxLength: Math.min(maxLength, 80) }), weight: 5 },
    { arbitrary: fc.string({ unit: fc.oneof(char(0x20, 0x7e), char(0x80, 0xff), fc.constant("\t")), minLength: 1, maxLength: Math.min(maxLength, 80) }), weight: 3 },
    {
      arbitrary: fc.record({ unit: fc.string({ unit: char(0x21, 0x7e), minLength: 1, maxLength: 4 }), size: fc.integer({ min: 100, max: maxLength }) })
        .map(({ unit, size }) => unit.repeat(Math.ceil(size / unit.length)).slice(0, size)),
      weight: 1
    }
  ).map((value) => value.trim()).filter((value) => value.length > 0)

// ---------------------------------------------------------------------------------------------
// JSON text

export const jsonString = (value: string) => JSON.stringify(value)

/** Numbers as JSON text, including the ones JavaScript cannot hold. */
const numberText: fc.Arbitrary<string> = fc.oneof(
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((value) => JSON.stringify(value)),
  fc.constantFrom("0", "-0", "1e400", "-1e400", "1e-400", "9007199254740993", "123456789012345678901234567890", "0.1", "1E2", "-2147483649", "4294967296")
)

export const scalarText: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom("null", "true", "false"),
  numberText,
  nastyString.map(jsonString)
)

/** A deeply nested array or object (1,000 to 10,000 levels) around a leaf. */
export const deepText = (minDepth = 1_000, maxDepth = 10_000): fc.Arbitrary<string> =>
  fc.record({
    depth: fc.integer({ min: minDepth, max: maxDepth }),
    shape: fc.constantFrom("array", "object", "mixed", "unclosed"),
    leaf: fc.constantFrom("null", "1", "\"x\"", "{}", "[]")
  }).map(({ depth, shape, leaf }) => {
    switch (shape) {
      case "array":
        return "[".repeat(depth) + leaf + "]".repeat(depth)
      case "object":
        return "{\"a\":".repeat(depth) + leaf + "}".repeat(depth)
      case "mixed":
        return "[{\"a\":".repeat(depth / 2) + leaf + "}]".repeat(depth / 2)
      default:
        // Not JSON at all: opened and never closed.
        return "[".repeat(depth)
    }
  })

/** Any JSON text, of any type. */
export const anyJsonText: fc.Arbitrary<string> = fc.jsonValue({ maxDepth: 4 }).map((value) => JSON.stringify(value))

/** A value of the wrong type (or the right one by chance) for any field. */
export const wrongValueText: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: scalarText, weight: 10 },
  { arbitrary: anyJsonText, weight: 4 },
  { arbitrary: fc.array(scalarText, { maxLength: 5 }).map((items) => `[${items.join(",")}]`), weight: 2 },
  { arbitrary: fc.dictionary(nastyString, scalarText, { maxKeys: 4 }).map(objectText), weight: 2 },
  { arbitrary: hugeString.map(jsonString), weight: 1 },
  { arbitrary: deepText(), weight: 1 }
)

function objectText(entries: Record<string, string> | ReadonlyArray<readonly [string, string]>): string {
  const list = Array.isArray(entries) ? entries : Object.entries(entries)
  return `{${list.map(([key, value]) => `${jsonString(key)}:${value}`).join(",")}}`
}

/** Keys that are not in any schema, some of them with a meaning to JavaScript. */
const extraKey = fc.oneof(fc.constantFrom("__proto__", "constructor", "prototype", "toString", "", "extra", "role", "sub", "tenant"), nastyString)

/**
 * An object with (some of) the endpoint's keys: each present key gets a plausible value or a
 * wrong one, some keys go missing, unknown keys come along, and a key may appear twice.
 */
export const shapedObjectText = (fields: Readonly<Record<string, fc.Arbitrary<string>>>): fc.Arbitrary<string> =>
  fc.tuple(
    fc.tuple(...Object.entries(fields).map(([key, plausible]) =>
      fc.oneof(
        { arbitrary: plausible.map((value) => [[key, value] as const]), weight: 5 },
        { arbitrary: wrongValueText.map((value) => [[key, value] as const]), weight: 4 },
        { arbitrary: fc.constant([]), weight: 1 },
        // Twice: JSON.parse keeps the last one.
        { arbitrary: fc.tuple(wrongValueText, plausible).map(([first, second]) => [[key, first] as const, [key, second] as const]), weight: 1 }
      )
    )),
    fc.array(fc.tuple(extraKey, wrongValueText), { maxLength: 3 })
  ).map(([known, extra]) => objectText([...known.flat(), ...extra]))

/** A JSON array of arguments (POST /function/:name). */
export const argumentsText = (plausible: fc.Arbitrary<string>): fc.Arbitrary<string> =>
  fc.oneof(
    { arbitrary: fc.array(plausible, { maxLength: 6 }).map((items) => `[${items.join(",")}]`), weight: 5 },
    { arbitrary: fc.array(wrongValueText, { maxLength: 6 }).map((items) => `[${items.join(",")}]`), weight: 4 },
    { arbitrary: fc.integer({ min: 990, max: 1_100 }).map((count) => `[${Array.from({ length: count }, () => "1").join(",")}]`), weight: 1 }
  )

// ---------------------------------------------------------------------------------------------
// Bodies

export interface GeneratedBody {
  readonly kind: string
  readonly body: string | Uint8Array | undefined
  /** Undefined: no content-type header (with a byte body, fetch adds none). */
  readonly contentType: string | undefined
}

const JSON_CONTENT_TYPES = ["application/json", "application/json; charset=utf-8", "Application/JSON", " application/json ", "application/json;charset=utf-16", "application/json; charset=latin1", "application/json; boundary=x"]
const OTHER_CONTENT_TYPES = ["text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=xyz", "application/xml", "application/octet-stream", "application/merge-patch+json", "application/vnd.api+json", "*/*", "json", "application"]

export const contentType: fc.Arbitrary<string | undefined> = fc.oneof(
  { arbitrary: fc.constant("application/json"), weight: 30 },
  { arbitrary: fc.constantFrom(...JSON_CONTENT_TYPES), weight: 5 },
  { arbitrary: fc.constant(undefined), weight: 3 },
  { arbitrary: fc.constantFrom(...OTHER_CONTENT_TYPES), weight: 3 },
  { arbitrary: headerValue(200), weight: 1 }
)

/** Text that is not JSON, or JSON with something wrong around it. */
const nonJsonText = (valid: fc.Arbitrary<string>): fc.Arbitrary<{ kind: string; body: string | Uint8Array }> =>
  fc.oneof(
    nastyString.map((body) => ({ kind: "non-json:string", body })),
    fc.tuple(valid, fc.nat()).map(([text, cut]) => ({ kind: "non-json:truncated", body: text.slice(0, text.length === 0 ? 0 : cut % text.length) })),
    valid.map((text) => ({ kind: "non-json:bom", body: `\ufeff${text}` })),
    valid.map((text) => ({ kind: "non-json:trailing", body: `${text} x` })),
    valid.map((text) => ({ kind: "non-json:concatenated", body: `${text}${text}` })),
    fc.uint8Array({ maxLength: 2_000 }).map((body) => ({ kind: "non-json:binary", body })),
    // Invalid UTF-8 inside a JSON string.
    fc.uint8Array({ minLength: 1, maxLength: 50 }).map((bytes) => ({
      kind: "non-json:bad-utf8",
      body: new Uint8Array([...Buffer.from("{\"x\":\""), 0xff, 0xfe, ...bytes.map((byte) => byte | 0x80), ...Buffer.from("\"}")])
    })),
    valid.map((text) => ({ kind: "non-json:utf16", body: new Uint8Array(Buffer.from(text, "utf16le")) })),
    fc.constantFrom("{", "[", "}", "]", "{\"", "{'a':1}", "{\"a\":1,}", "[1,]", "\"unterminated", "NaN", "Infinity", "undefined", "01", "-", "{\"a\" 1}", "\u0000", "{\"a\":\"\u0000\"}", "[\"\\ud800\"]", "\"\\u0000\"", "1e999999", "{\"a\":1}}", "[[[[[[[[[[", "/*c*/{}", "{}//")
      .map((body) => ({ kind: "non-json:fixed", body }))
  )

/** Every kind of body for an endpoint whose valid body is `valid` (plausible JSON text). */
export const bodyFor = (valid: fc.Arbitrary<string>, shaped: fc.Arbitrary<string>): fc.Arbitrary<GeneratedBody> =>
  fc.oneof(
    { arbitrary: fc.tuple(valid, contentType).map(([body, type]) => ({ kind: "valid", body, contentType: type })), weight: 15 },
    { arbitrary: fc.tuple(shaped, contentType).map(([body, type]) => ({ kind: "shaped", body, contentType: type })), weight: 45 },
    { arbitrary: fc.tuple(anyJsonText, contentType).map(([body, type]) => ({ kind: "any-json", body, contentType: type })), weight: 10 },
    { arbitrary: fc.tuple(deepText(), contentType).map(([body, type]) => ({ kind: "deep", body, contentType: type })), weight: 5 },
    { arbitrary: fc.tuple(nonJsonText(valid), contentType).map(([{ kind, body }, type]) => ({ kind, body, contentType: type })), weight: 12 },
    {
      arbitrary: fc.tuple(fc.constantFrom<string | Uint8Array | undefined>(undefined, "", " ", "\n", new Uint8Array()), contentType)
        .map(([body, type]) => ({ kind: "empty", body, contentType: type })),
      weight: 3
    }
  )

/** Bodies at the size limit: a few per endpoint, not random (each costs a megabyte). */
export const bodiesAroundTheLimit = (field: string): ReadonlyArray<GeneratedBody> => {
  const stringBody = (size: number) => {
    const prefix = `{${jsonString(field)}:"`
    return `${prefix}${"x".repeat(size - prefix.length - 2)}"}`
  }
  return [
    { kind: "limit:just-under", body: stringBody(MIB - 16), contentType: "application/json" },
    { kind: "limit:exact", body: stringBody(MIB), contentType: "application/json" },
    { kind: "limit:just-over", body: stringBody(MIB + 1), contentType: "application/json" },
    { kind: "limit:2-mib", body: stringBody(2 * MIB), contentType: "application/json" },
    { kind: "limit:deep-1-mib", body: "[".repeat(MIB / 2 - 1) + "]".repeat(MIB / 2 - 1), contentType: "application/json" },
    { kind: "limit:binary-over", body: new Uint8Array(MIB + 100).fill(0x7b), contentType: undefined }
  ]
}

// ---------------------------------------------------------------------------------------------
// Plausible values

export const plausibleEmail: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.emailAddress().map(jsonString), weight: 4 },
  { arbitrary: fc.tuple(nastyString, nastyString).map(([local, domain]) => jsonString(`${local}@${domain}`)), weight: 3 },
  { arbitrary: fc.constantFrom("fuzz-owner@plinth.test", "Fuzz-Owner@Plinth.Test", "fuzz.owner+x@plinth.test", "x@y", `${"a".repeat(310)}@b.c`, `${"a".repeat(400)}@b.c`).map(jsonString), weight: 1 }
)

export const plausibleRole = fc.oneof(
  fc.constantFrom("owner", "admin", "staff", "member").map(jsonString),
  fc.constantFrom("anon", "OWNER", "postgres", "", "authenticator").map(jsonString)
)

export const plausiblePassword = fc.oneof(
  fc.string({ minLength: 8, maxLength: 128 }).map(jsonString),
  fc.string({ unit: "binary", minLength: 8, maxLength: 128 }).map(jsonString),
  fc.string({ maxLength: 7 }).map(jsonString),
  fc.string({ minLength: 129, maxLength: 1_100 }).map(jsonString)
)

export const plausibleToken = fc.oneof(
  fc.stringMatching(/^[0-9a-f]{64}$/).map(jsonString),
  fc.string({ maxLength: 300 }).map(jsonString),
  fc.string({ unit: char(0x30, 0x39), minLength: 250, maxLength: 260 }).map(jsonString)
)

export const plausibleTitle = fc.oneof(fc.string({ maxLength: 200 }).map(jsonString), fc.string({ unit: "binary", maxLength: 210 }).map(jsonString))

export const plausibleContent = fc.oneof(
  { arbitrary: fc.string({ minLength: 1, maxLength: 200 }).map(jsonString), weight: 5 },
  { arbitrary: fc.string({ unit: "binary", minLength: 1, maxLength: 200 }).map(jsonString), weight: 3 },
  { arbitrary: fc.constantFrom(" ", "\n\t", "hi", "x".repeat(100_000), "x".repeat(100_001)).map(jsonString), weight: 1 }
)

/** A SQL literal of some type, as SQL text. */
const sqlLiteral: fc.Arbitrary<string> = fc.oneof(
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map(String),
  nastyString.map((text) => `'${text.replaceAll("'", "''").replaceAll("\u0000", "")}'`),
  fc.constantFrom("NULL", "true", "false", "now()", "'2024-01-01'::date", "'{\"a\":1}'::jsonb", "ARRAY[1,2,3]", "'\\x00ff'::bytea", "interval '1 day'",
    "1::bigint", "1.5::numeric", "'1 2'::point", "'(1,2)'::int4range", "'a'::money", "B'101'", "'a b'::tsvector", "ROW(1, 'a')", "ARRAY[[1,2],[3,4]]", "gen_random_uuid()")
)

/** Statements that end quickly: constants, the fuzz table, refused kinds, and random text. */
const SQL_TEMPLATES = [
  "SELECT 1", "SELECT $1", "SELECT $1::text", "SELECT $1::int", "SELECT $1::bigint", "SELECT $1::numeric", "SELECT $1::boolean", "SELECT $1::date",
  "SELECT $1::timestamptz", "SELECT $1::uuid", "SELECT $1::jsonb", "SELECT $1::json", "SELECT $1::text[]", "SELECT $1::int[]", "SELECT $1, $2",
  "SELECT $1::jsonb -> 'a'", "SELECT jsonb_typeof($1::jsonb)", "SELECT length($1)", "SELECT $2", "SELECT $1000", "SELECT 1/0", "SELECT 'x'::point",
  "SELECT ARRAY[[1,2],[3,4]]", "SELECT * FROM fuzz_items LIMIT 5", "SELECT * FROM fuzz_items_v WHERE name = $1",
  "INSERT INTO fuzz_items (name, amount, flag, due, meta, kind) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
  "INSERT INTO fuzz_items (name) VALUES ($1)", "UPDATE fuzz_items SET name = $1 WHERE id = $2", "UPDATE fuzz_items SET amount = $1 WHERE name = $2 RETURNING *",
  "DELETE FROM fuzz_items WHERE name = $1", "DELETE FROM fuzz_items WHERE id = $1 RETURNING id", "SELECT sys.list_apps()", "SELECT * FROM sys.pages_v",
  "SELECT current_setting('app.user_id')", "SELECT * FROM sys.users", "SELECT sys.get_table_permissions()", "SELECT sys.create_table($1, $2::jsonb)",
  "SELECT sys.update_profile($1, $2)", "SELECT sys.create_page($1, $2, $3)",
  "DROP TABLE fuzz_items", "CREATE TABLE x (a int)", "SELECT 1; SELECT 2", "BEGIN", "COMMIT", "SET ROLE postgres", "RESET ROLE", "SHOW search_path",
  "SELECT set_config('role', 'postgres', false)", "SELECT pg_notify('x', 'y')", "SELECT lo_import('/etc/passwd')", "SELECT 1 INTO t",
  "COPY fuzz_items TO STDOUT", "EXPLAIN SELECT 1", "VACUUM", "LISTEN x", "DO $$ BEGIN END $$", "WITH d AS (DELETE FROM fuzz_items RETURNING id) SELECT count(*) FROM d",
  "UPDATE pg_settings SET setting = 'x'", "SELECT pg_advisory_lock(1)", "MERGE INTO fuzz_items USING fuzz_items s ON false WHEN NOT MATCHED THEN DO NOTHING",
  "", " ", ";", "--", "/*", "SELECT", "SELECT 'unterminated", "SELECT $", "SELECT $0", "SELECT $-1", "SELECT $99999999999"
]

export const plausibleSql: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.constantFrom(...SQL_TEMPLATES), weight: 6 },
  { arbitrary: fc.array(sqlLiteral, { minLength: 1, maxLength: 5 }).map((literals) => `SELECT ${literals.join(", ")}`), weight: 4 },
  // A template with random damage: a cut, or junk inserted somewhere.
  {
    arbitrary: fc.tuple(fc.constantFrom(...SQL_TEMPLATES), fc.nat(), nastyString).map(([template, at, junk]) => {
      const position = template.length === 0 ? 0 : at % template.length
      return at % 2 === 0 ? template.slice(0, position) : template.slice(0, position) + junk + template.slice(position)
    }),
    weight: 3
  },
  { arbitrary: nastyString, weight: 2 },
  { arbitrary: fc.constantFrom("SELECT " + "(".repeat(3_000) + "1" + ")".repeat(3_000), "SELECT " + "1+".repeat(20_000) + "1", "SELECT " + "(".repeat(40_000) + "1" + ")".repeat(40_000), `SELECT '${"x".repeat(99_980)}'`, `SELECT '${"x".repeat(100_001)}'`), weight: 1 }
).map(jsonString)

/** Bind parameters: values of every type, absent, too many. */
export const plausibleParams: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.array(fc.oneof(scalarText, anyJsonText), { maxLength: 8 }).map((items) => `[${items.join(",")}]`), weight: 6 },
  { arbitrary: fc.array(wrongValueText, { maxLength: 4 }).map((items) => `[${items.join(",")}]`), weight: 3 },
  { arbitrary: fc.integer({ min: 990, max: 1_100 }).map((count) => `[${Array.from({ length: count }, (_, index) => String(index)).join(",")}]`), weight: 1 },
  { arbitrary: deepText(1_000, 2_000).map((deep) => `[${deep}]`), weight: 1 }
)

/** Function names for POST /function/:name: harmless built-ins, blocked schemas, denied and unknown names, garbage. */
export const functionPath: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.constantFrom("now", "lower", "upper", "length", "abs", "md5", "initcap", "reverse", "btrim", "jsonb_typeof", "to_jsonb", "jsonb_array_length", "public.nope", "nope", "pg_catalog.now", "sys.list_apps", "SYS.list_apps", "information_schema.x", "plinth.x", "extensions.crypt", "set_config", "pg_terminate_backend", "lo_import", "dblink", "pg_read_file", "pg_notify"), weight: 6 },
  { arbitrary: fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,70}(\.[A-Za-z_][A-Za-z0-9_]{0,70})?$/), weight: 2 },
  { arbitrary: nastyString.map((name) => encodeURIComponent(name.replace(/[\ud800-\udfff]/g, "x"))), weight: 2 },
  { arbitrary: fc.constantFrom("", "%", "%zz", "a;b", "now;drop", "a/b", "a%2Fb", "a%00", "..", "%2e%2e", "a.b.c", `${"a".repeat(2_000)}`, "now?x=1", "now#x"), weight: 1 }
).map((name) => `/function/${name}`)

// ---------------------------------------------------------------------------------------------
// Headers

export interface Tokens {
  /** Valid and reaching past authentication: most requests carry it. */
  readonly good: string
  /** Other JWTs: another role, expired, another secret, tampered, alg none, another tenant. */
  readonly others: ReadonlyArray<string>
}

/** Authorization: mostly the good token (so the fuzz reaches the handler), else anything. */
export const authorization = (tokens: Tokens, goodWeight: number): fc.Arbitrary<string | undefined> =>
  fc.oneof(
    { arbitrary: fc.constant(`Bearer ${tokens.good}`), weight: goodWeight },
    { arbitrary: fc.constant(undefined), weight: 4 },
    { arbitrary: fc.constantFrom(...tokens.others).map((token) => `Bearer ${token}`), weight: 4 },
    { arbitrary: headerValue(300).map((junk) => `Bearer ${junk}`), weight: 4 },
    { arbitrary: headerValue(300), weight: 2 },
    {
      arbitrary: fc.constantFrom(
        "Bearer", "Bearer ", "bearer " + tokens.good, "BEARER " + tokens.good, "Bearer  " + tokens.good, `Bearer ${tokens.good} x`, `Bearer ${tokens.good}x`,
        `Basic ${Buffer.from("a:b").toString("base64")}`, `Bearer ${tokens.good.split(".").slice(0, 2).join(".")}.`, "Bearer a.b.c", "Bearer ..", "Bearer e30.e30.",
        `Bearer ${tokens.good}, Bearer ${tokens.good}`, `Bearer ${"a".repeat(4_097)}`, `Bearer ${tokens.good}${"=".repeat(100)}`
      ),
      weight: 3
    },
    { arbitrary: fc.integer({ min: 4_000, max: 6_000 }).map((size) => `Bearer ${"x".repeat(size)}`), weight: 1 }
  )

export const appSchemaHeader = (known: ReadonlyArray<string>): fc.Arbitrary<string | undefined> =>
  fc.oneof(
    { arbitrary: fc.constant(undefined), weight: 12 },
    { arbitrary: fc.constantFrom("public", ...known), weight: 4 },
    { arbitrary: fc.stringMatching(/^[a-z_][a-z0-9_]{0,62}$/), weight: 2 },
    { arbitrary: fc.constantFrom("PUBLIC", "sys", "pg_catalog", "information_schema", "plinth", "extensions", "a".repeat(63), "a".repeat(64), "fuzz_app ", "fuzz-app", "\"fuzz_app\"", "fuzz_app;drop", "fuzz_app,public"), weight: 2 },
    { arbitrary: headerValue(4_000), weight: 2 }
  )

export const tenantHeader = (known: ReadonlyArray<string>): fc.Arbitrary<string | undefined> =>
  fc.oneof(
    { arbitrary: fc.constant(undefined), weight: 8 },
    { arbitrary: fc.constantFrom(...(known.length > 0 ? known : ["acme"])), weight: 6 },
    { arbitrary: fc.stringMatching(/^[a-z][a-z0-9_]{0,62}$/), weight: 3 },
    { arbitrary: fc.constantFrom("postgres", "template0", "template1", "plinth_test_template", "A", "a".repeat(63), "a".repeat(64), "a-b", "a b", "1a", "_a"), weight: 2 },
    { arbitrary: headerValue(4_000), weight: 2 }
  )

export interface HeaderOptions {
  readonly authorization: fc.Arbitrary<string | undefined>
  readonly appSchemas: ReadonlyArray<string>
  readonly tenants: ReadonlyArray<string>
  /** The header the stack takes the client address from (CLIENT_IP_HEADER). */
  readonly clientIpHeader: string
}

/** Random headers; the content type comes from the body. Values stay under Node's 16 KiB header bound in total. */
export const headersFor = (options: HeaderOptions): fc.Arbitrary<Record<string, string>> =>
  fc.record({
    authorization: options.authorization,
    appSchema: appSchemaHeader(options.appSchemas),
    tenant: tenantHeader(options.tenants),
    client: fc.oneof({ arbitrary: fc.uuid(), weight: 8 }, { arbitrary: fc.constant(undefined), weight: 1 }, { arbitrary: headerValue(200), weight: 1 }),
    accept: fc.option(fc.constantFrom("*/*", "text/event-stream", "application/json", "text/html", "x/y;q=0"), { nil: undefined })
  }).map(({ authorization, appSchema, tenant, client, accept }) => {
    const headers: Record<string, string> = {}
    if (authorization !== undefined) headers["authorization"] = authorization
    if (appSchema !== undefined) headers["x-app-schema"] = appSchema
    if (tenant !== undefined) headers["x-tenant"] = tenant
    if (client !== undefined) headers[options.clientIpHeader] = client
    if (accept !== undefined) headers["accept"] = accept
    return headers
  })

/** A request from a body and headers. */
export const requestOf = (method: FuzzRequest["method"], path: string, body: GeneratedBody, headers: Record<string, string>): FuzzRequest => ({
  kind: body.kind,
  method,
  path,
  headers: body.contentType === undefined ? headers : { ...headers, "content-type": body.contentType },
  // A string body without a content type would get fetch's text/plain: send its bytes instead.
  body: body.contentType === undefined && typeof body.body === "string" ? new TextEncoder().encode(body.body) : body.body
})
