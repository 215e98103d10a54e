/**
 * How result columns become JSON, decided once in the driver's type registry so that rows come
 * out of the database ready to send (and can be streamed without knowing their column types):
 *
 * | PostgreSQL | JSON |
 * | --- | --- |
 * | bigint (int8) | string, e.g. `"9007199254740993"` (beyond 2^53 a number would lose digits) |
 * | numeric | string, e.g. `"1.50"` (the driver's own mapping: exact) |
 * | timestamp | string, ISO 8601 without offset, e.g. `"2026-11-22T03:00:42.870123"` |
 * | timestamptz | string, ISO 8601 in UTC, e.g. `"2026-11-22T03:00:42.870123Z"` |
 * | time | string `"HH:MM:SS[.ffffff]"` |
 * | interval | string, ISO 8601 duration, e.g. `"P1Y2M3DT4H5M6.5S"` |
 * | bytea | string `"\\x"` + hex, as PostgreSQL prints it |
 * | date, uuid, text, enum | string |
 * | json, jsonb | JSON as stored |
 * | integer, real, double, boolean | number, boolean |
 * | tid, xid, xid8, cid, pg_lsn, oidvector, int2vector, "char", jsonpath, xml, pg_snapshot | string, as PostgreSQL prints it |
 * | composite (a row type, `CREATE TYPE ... AS`) | object keyed by attribute, each converted like a column |
 * | arrays of any of these | arrays |
 *
 * `infinity` and `-infinity` timestamps are the strings `"infinity"` and `"-infinity"`.
 *
 * Types without a JSON form here (ranges, geometric types, money, bit strings, text-search types,
 * reg* types, anonymous records, multi-dimensional arrays) are refused with a message asking for a
 * cast to text, rather than sent as the binary bytes the driver would otherwise pass through as a
 * garbled string. Composite, enum, domain and extension types have OIDs of their database, so
 * they are read from its catalog (`ResultTypes`), again whenever the catalog changed.
 */
import { PgTypes } from "@effect/sql-pg"
import { Effect, Result, Semaphore } from "effect"
import { SqlClient } from "effect/sql"
import type { CatalogWatch } from "./CatalogWatch.ts"

const EPOCH_2000_MS = Date.UTC(2000, 0, 1)
const INT64_MAX = 0x7fffffffffffffffn
const INT64_MIN = -0x8000000000000000n

const view = (bytes: Uint8Array) => new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)

const trimFraction = (fraction: string) => fraction.replace(/0+$/, "")

/** Microseconds since 2000-01-01 → `YYYY-MM-DDTHH:MM:SS[.ffffff]` (no zone). */
const formatTimestamp = (micros: bigint): string => {
  if (micros === INT64_MAX) return "infinity"
  if (micros === INT64_MIN) return "-infinity"
  let millis = micros / 1000n
  let rest = micros % 1000n
  if (rest < 0n) {
    rest += 1000n
    millis -= 1n
  }
  const iso = new Date(EPOCH_2000_MS + Number(millis)).toISOString() // ...THH:MM:SS.mmmZ
  const [seconds, fraction = "000"] = iso.slice(0, -1).split(".")
  const digits = trimFraction(`${fraction}${String(rest).padStart(3, "0")}`)
  return digits === "" ? seconds! : `${seconds}.${digits}`
}

const formatTime = (micros: bigint): string => {
  const totalSeconds = micros / 1_000_000n
  const fraction = trimFraction(String(micros % 1_000_000n).padStart(6, "0"))
  const hh = String(totalSeconds / 3600n).padStart(2, "0")
  const mm = String((totalSeconds / 60n) % 60n).padStart(2, "0")
  const ss = String(totalSeconds % 60n).padStart(2, "0")
  return `${hh}:${mm}:${ss}${fraction === "" ? "" : `.${fraction}`}`
}

const formatInterval = (months: number, days: number, micros: bigint): string => {
  const years = Math.trunc(months / 12)
  const restMonths = months % 12
  const sign = micros < 0n ? -1n : 1n
  const abs = micros * sign
  const hours = abs / 3_600_000_000n
  const minutes = (abs / 60_000_000n) % 60n
  const seconds = (abs / 1_000_000n) % 60n
  const fraction = trimFraction(String(abs % 1_000_000n).padStart(6, "0"))
  const s = sign < 0n ? "-" : ""
  const date = `${years ? `${years}Y` : ""}${restMonths ? `${restMonths}M` : ""}${days ? `${days}D` : ""}`
  const time = `${hours ? `${s}${hours}H` : ""}${minutes ? `${s}${minutes}M` : ""}${
    seconds || fraction ? `${s}${seconds}${fraction ? `.${fraction}` : ""}S` : ""
  }`
  if (date === "" && time === "") return "PT0S"
  return `P${date}${time === "" ? "" : `T${time}`}`
}

const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, "0"))
const formatBytea = (bytes: Uint8Array): string => {
  let out = "\\x"
  for (const byte of bytes) out += HEX[byte]
  return out
}

const sized = (bytes: Uint8Array, size: number, what: string) =>
  bytes.byteLength === size ? Result.succeed(bytes) : Result.fail(new PgTypes.CodecError({ message: `invalid ${what} length` }))

const invalid = (what: string) => Result.fail(new PgTypes.CodecError({ message: `invalid ${what} value` }))

const utf8 = new TextDecoder("utf-8", { fatal: true })

/** "char": one byte; PostgreSQL prints a high byte as `\ooo` and NUL as the empty string. */
const formatChar = (bytes: Uint8Array): string => {
  const byte = bytes[0] ?? 0
  if (byte === 0) return ""
  return byte < 0x80 ? String.fromCharCode(byte) : `\\${byte.toString(8).padStart(3, "0")}`
}

/** oidvector, int2vector: a one-dimensional array on the wire, space-separated numbers in text. */
const formatVector = (bytes: Uint8Array, what: string): Result.Result<string, PgTypes.CodecError> => {
  if (bytes.byteLength < 12) return invalid(what)
  const data = view(bytes)
  const dimensions = data.getInt32(0)
  if (dimensions === 0) return Result.succeed("")
  if (dimensions !== 1 || bytes.byteLength < 20) return invalid(what)
  const count = data.getInt32(12)
  const numbers: Array<string> = []
  let offset = 20
  for (let index = 0; index < count; index++) {
    if (offset + 4 > bytes.byteLength) return invalid(what)
    const size = data.getInt32(offset)
    if ((size !== 2 && size !== 4) || offset + 4 + size > bytes.byteLength) return invalid(what)
    numbers.push(String(size === 2 ? data.getInt16(offset + 4) : data.getUint32(offset + 4)))
    offset += 4 + size
  }
  return Result.succeed(numbers.join(" "))
}

/** pg_lsn: two 32-bit halves in hex. */
const formatLsn = (high: number, low: number) => `${high.toString(16).toUpperCase()}/${low.toString(16).toUpperCase()}`

/** pg_snapshot, txid_snapshot: `xmin:xmax:xip,...`. */
const formatSnapshot = (bytes: Uint8Array): Result.Result<string, PgTypes.CodecError> => {
  if (bytes.byteLength < 20) return invalid("snapshot")
  const data = view(bytes)
  const count = data.getInt32(0)
  if (count < 0 || bytes.byteLength !== 20 + 8 * count) return invalid("snapshot")
  const running: Array<string> = []
  for (let index = 0; index < count; index++) running.push(String(data.getBigUint64(20 + 8 * index)))
  return Result.succeed(`${data.getBigUint64(4)}:${data.getBigUint64(12)}:${running.join(",")}`)
}

/** Text as sent, after `skip` bytes of header (jsonpath's version byte). */
const text = (skip: number, what: string) => (bytes: Uint8Array): Result.Result<string, PgTypes.CodecError> => {
  try {
    return Result.succeed(utf8.decode(bytes.subarray(skip)))
  } catch {
    return invalid(what)
  }
}

/** A decoder of ours; encoding parameters stays with the driver's built-in codec for the OID. */
const codec = (oid: number, decode: (bytes: Uint8Array) => Result.Result<string, PgTypes.CodecError>): PgTypes.Codec<unknown> => ({
  encode: (value) => PgTypes.encode(value, oid),
  decode
})

const OID = PgTypes.OID

/**
 * Types the driver would hand over as raw binary, each with its array type: refused by name, so
 * the caller can cast. A reg* value is an OID on the wire: its name depends on the
 * catalog and the search path, which only PostgreSQL's own rendering gets right.
 */
const WITHOUT_JSON_FORM: ReadonlyArray<readonly [number, string, number?]> = [
  [600, "point", 1017], [601, "lseg", 1018], [602, "path", 1019], [603, "box", 1020], [604, "polygon", 1027], [628, "line", 629],
  [718, "circle", 719], [790, "money", 791], [829, "macaddr", 1040], [774, "macaddr8", 775], [1560, "bit", 1561],
  [1562, "bit varying", 1563], [3614, "tsvector", 3643], [3615, "tsquery", 3645], [2249, "record", 2287],
  [3904, "int4range", 3905], [3906, "numrange", 3907], [3908, "tsrange", 3909], [3910, "tstzrange", 3911],
  [3912, "daterange", 3913], [3926, "int8range", 3927],
  [4451, "int4multirange", 6150], [4532, "nummultirange", 6151], [4533, "tsmultirange", 6152], [4534, "tstzmultirange", 6153],
  [4535, "datemultirange", 6155], [4536, "int8multirange", 6157],
  [24, "regproc", 1008], [2202, "regprocedure", 2207], [2203, "regoper", 2208], [2204, "regoperator", 2209],
  [2205, "regclass", 2210], [2206, "regtype", 2211], [3734, "regconfig", 3735], [3769, "regdictionary", 3770],
  [4089, "regnamespace", 4090], [4096, "regrole", 4097], [4191, "regcollation", 4192],
  [32, "pg_ddl_command"], [2277, "anyarray"], [5078, "anycompatiblearray"], [3361, "pg_ndistinct"], [3402, "pg_dependencies"],
  [5017, "pg_mcv_list"], [4600, "pg_brin_bloom_summary"], [4601, "pg_brin_minmax_multi_summary"]
]

/** The message of a result column that cannot be sent as JSON; SqlRunner recognises it. */
export const NO_JSON_FORM = "has no JSON form; cast it to text"

const refusal = (name: string) => () => Result.fail(new PgTypes.CodecError({ message: `a column of type ${name} ${NO_JSON_FORM}` }))

/** Built-in types the driver does not know that have a text form, with their array types. */
const TEXT_FORMS: ReadonlyArray<readonly [number, number | undefined, (bytes: Uint8Array) => Result.Result<string, PgTypes.CodecError>]> = [
  [27, 1010, (bytes) => Result.map(sized(bytes, 6, "tid"), (b) => `(${view(b).getUint32(0)},${view(b).getUint16(4)})`)], // tid
  [28, 1011, (bytes) => Result.map(sized(bytes, 4, "xid"), (b) => String(view(b).getUint32(0)))], // xid
  [29, 1012, (bytes) => Result.map(sized(bytes, 4, "cid"), (b) => String(view(b).getUint32(0)))], // cid
  [5069, 271, (bytes) => Result.map(sized(bytes, 8, "xid8"), (b) => String(view(b).getBigUint64(0)))], // xid8
  [3220, 3221, (bytes) => Result.map(sized(bytes, 8, "pg_lsn"), (b) => formatLsn(view(b).getUint32(0), view(b).getUint32(4)))], // pg_lsn
  [30, 1013, (bytes) => formatVector(bytes, "oidvector")], // oidvector
  [22, 1006, (bytes) => formatVector(bytes, "int2vector")], // int2vector
  [18, 1002, (bytes) => Result.map(sized(bytes, 1, "char"), formatChar)], // "char"
  [4072, 4073, (bytes) => bytes[0] === 1 ? text(1, "jsonpath")(bytes) : invalid("jsonpath")], // jsonpath
  [5038, 5039, formatSnapshot], // pg_snapshot
  [2970, 2949, formatSnapshot], // txid_snapshot
  [142, 143, text(0, "xml")], // xml
  [1790, 2201, text(0, "refcursor")], // refcursor
  [2275, 1263, text(0, "cstring")], // cstring
  [705, undefined, text(0, "unknown")], // unknown
  [194, undefined, text(0, "pg_node_tree")], // pg_node_tree
  [2278, undefined, () => Result.succeed("")] // void
]

/** The built-in types: the registry of the service's own pools, and the start of `makeResultTypes`'. */
export const makeJsonColumnTypes = (): PgTypes.Registry => {
  const registry = PgTypes.makeRegistry()
  registry.register(OID.int8, codec(OID.int8, (bytes) => Result.map(sized(bytes, 8, "int8"), (b) => String(view(b).getBigInt64(0)))), {
    arrayOid: OID.int8Array
  })
  registry.register(
    OID.timestamp,
    codec(OID.timestamp, (bytes) => Result.map(sized(bytes, 8, "timestamp"), (b) => formatTimestamp(view(b).getBigInt64(0)))),
    { arrayOid: OID.timestampArray }
  )
  registry.register(
    OID.timestamptz,
    codec(OID.timestamptz, (bytes) =>
      Result.map(sized(bytes, 8, "timestamptz"), (b) => {
        const text = formatTimestamp(view(b).getBigInt64(0))
        return text.endsWith("infinity") ? text : `${text}Z`
      })),
    { arrayOid: OID.timestamptzArray }
  )
  registry.register(
    OID.time,
    codec(OID.time, (bytes) => Result.map(sized(bytes, 8, "time"), (b) => formatTime(view(b).getBigInt64(0)))),
    { arrayOid: OID.timeArray }
  )
  registry.register(
    OID.interval,
    codec(OID.interval, (bytes) =>
      Result.map(sized(bytes, 16, "interval"), (b) => formatInterval(view(b).getInt32(12), view(b).getInt32(8), view(b).getBigInt64(0)))),
    { arrayOid: OID.intervalArray }
  )
  registry.register(OID.bytea, codec(OID.bytea, (bytes) => Result.succeed(formatBytea(bytes))), { arrayOid: OID.byteaArray })
  for (const [oid, arrayOid, decode] of TEXT_FORMS) registry.register(oid, codec(oid, decode), { arrayOid })
  for (const [oid, name, arrayOid] of WITHOUT_JSON_FORM) registry.register(oid, codec(oid, refusal(name)), { arrayOid })
  return registry
}

/** OIDs the driver decodes itself (its built-in codecs), and the built-in ones decoded or refused here. */
const BUILT_IN_OIDS: ReadonlySet<number> = new Set([
  ...Object.values(PgTypes.OID),
  ...TEXT_FORMS.flatMap(([oid, arrayOid]) => arrayOid === undefined ? [oid] : [oid, arrayOid]),
  ...WITHOUT_JSON_FORM.flatMap(([oid, , arrayOid]) => arrayOid === undefined ? [oid] : [oid, arrayOid])
])

/** A type of the database's catalog that result columns may have (see CATALOG_TYPES). */
export interface CatalogType {
  readonly oid: number
  readonly name: string
  /** typtype: c composite, e enum, d domain, b base, r range, m multirange. */
  readonly kind: string
  readonly category: string
  readonly arrayOid: number
  readonly baseOid: number
  /** A composite's attributes in order, dropped ones left out: [name, type OID]. */
  readonly attributes: ReadonlyArray<readonly [string, number]> | null
}

/**
 * Every composite type (row types of tables and views included, the system's too), every domain
 * (a composite's attribute has the domain's OID, a column its base type's), and the types users
 * and extensions made; arrays come with their element types.
 */
const CATALOG_TYPES = `
  SELECT t.oid, t.typname::text AS name, t.typtype::text AS kind, t.typcategory::text AS category,
         t.typarray AS "arrayOid", t.typbasetype AS "baseOid",
         CASE WHEN t.typtype = 'c' THEN (
           SELECT coalesce(json_agg(json_build_array(a.attname, a.atttypid::int8) ORDER BY a.attnum), '[]')
           FROM pg_catalog.pg_attribute AS a
           WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped
         ) END AS attributes
  FROM pg_catalog.pg_type AS t
  WHERE t.typtype IN ('c', 'd') OR (t.oid >= 16384 AND t.typtype IN ('b', 'e', 'r', 'm') AND t.typcategory <> 'A')`

/**
 * The result column types of one database: the built-in ones (`makeJsonColumnTypes`) and those of
 * its catalog, read again whenever the catalog changed (CatalogWatch) before a connection is
 * handed out. A type created since the last read (outside Plinth's sys functions, which notify)
 * is known after the next change or restart.
 */
export const makeResultTypes = (sql: SqlClient.SqlClient, watch: CatalogWatch["Service"]) => {
  const registry = makeJsonColumnTypes()
  // The decoder of each catalog type as last read. The registry holds a stable codec per OID that
  // looks its decoder up here, because prepared statements keep the codecs they were described with.
  const decoders = new Map<number, PgTypes.Codec<unknown>["decode"]>()
  const registered = new Set<number>()
  const arrays = new Set<number>()
  const known = (oid: number) => BUILT_IN_OIDS.has(oid) || decoders.has(oid) || arrays.has(oid)
  const register = (oid: number, arrayOid: number) => {
    if (registered.has(oid)) return
    registered.add(oid)
    const decode = (bytes: Uint8Array) => {
      const current = decoders.get(oid)
      return current === undefined ? refusal(`oid ${oid}`)() : current(bytes)
    }
    registry.register(oid, { encode: (value) => PgTypes.encode(value, oid, registry), decode }, arrayOid === 0 ? undefined : { arrayOid })
  }
  const decoderOf = (type: CatalogType): PgTypes.Codec<unknown>["decode"] => {
    switch (type.kind) {
      case "c":
        return composite(type.name, type.attributes ?? [], registry, known)
      case "d":
        return (bytes) => PgTypes.decode(bytes, type.baseOid, 1, registry)
      case "e":
        return text(0, type.name)
      default:
        // Extension types: text-like ones (citext) are sent as text, the others are binary.
        return type.kind === "b" && type.category === "S" ? text(0, type.name) : refusal(type.name)
    }
  }
  const registerCatalog = (types: ReadonlyArray<CatalogType>) => {
    decoders.clear()
    arrays.clear()
    for (const type of types) {
      decoders.set(type.oid, decoderOf(type))
      if (type.arrayOid !== 0) arrays.add(type.arrayOid)
      register(type.oid, type.arrayOid)
    }
  }

  let loadedAt: number | undefined
  let loadedAtMillis = Number.NEGATIVE_INFINITY
  // While changes cannot be heard (no generation), read at most once a second.
  const stale = () => {
    const generation = watch.generation()
    return generation === undefined ? Date.now() - loadedAtMillis > 1_000 : generation !== loadedAt
  }
  const lock = Semaphore.makeUnsafe(1)
  const reload = lock.withPermit(Effect.suspend(() => {
    if (!stale()) return Effect.void
    const generation = watch.generation()
    return sql.unsafe<CatalogType>(CATALOG_TYPES).pipe(
      Effect.map((types) => {
        registerCatalog(types)
        loadedAt = generation
        loadedAtMillis = Date.now()
      }),
      // The statement that needed them meets the same failure and reports it.
      Effect.catch((error) => Effect.logWarning("result types could not be read from the catalog", error))
    )
  }))
  return {
    registry,
    /** Up to date with the catalog: immediate while nothing changed. */
    current: Effect.suspend(() => (stale() ? reload : Effect.void))
  }
}

/**
 * A composite value: attribute count, then each attribute's type OID, length and value. Each
 * attribute is decoded by the type the value says it has (its domain's base for a domain).
 */
const composite = (
  name: string,
  attributes: ReadonlyArray<readonly [string, number]>,
  registry: PgTypes.Registry,
  known: (oid: number) => boolean
) =>
(bytes: Uint8Array): Result.Result<unknown, PgTypes.CodecError> => {
  if (bytes.byteLength < 4) return invalid(name)
  const data = view(bytes)
  if (data.getInt32(0) !== attributes.length) {
    return Result.fail(new PgTypes.CodecError({ message: `a column of type ${name} changed while it was read; try again or cast it to text` }))
  }
  const value: Record<string, unknown> = {}
  let offset = 4
  for (const [attribute] of attributes) {
    if (offset + 8 > bytes.byteLength) return invalid(name)
    const oid = data.getUint32(offset)
    const size = data.getInt32(offset + 4)
    offset += 8
    let decoded: unknown = null
    if (size >= 0) {
      if (offset + size > bytes.byteLength) return invalid(name)
      if (!known(oid)) {
        return Result.fail(new PgTypes.CodecError({ message: `a column of type ${name} has an attribute whose type ${NO_JSON_FORM}` }))
      }
      const result = PgTypes.decode(bytes.subarray(offset, offset + size), oid, 1, registry)
      if (Result.isFailure(result)) return result
      decoded = result.success
      offset += size
    }
    // An attribute named __proto__ is a key like any other, not the object's prototype.
    Object.defineProperty(value, attribute, { value: decoded, enumerable: true, writable: true, configurable: true })
  }
  return offset === bytes.byteLength ? Result.succeed(value) : invalid(name)
}
