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
 * | arrays of any of these | arrays |
 *
 * `infinity` and `-infinity` timestamps are the strings `"infinity"` and `"-infinity"`.
 *
 * Types without a JSON form here (ranges, geometric types, money, bit strings, text-search types,
 * multi-dimensional arrays) are refused with a message asking for a cast to text, rather than
 * sent as the binary bytes the driver would otherwise pass through as a garbled string.
 */
import { PgTypes } from "@effect/sql-pg"
import { Result } from "effect"

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

/** A decoder of ours; encoding parameters stays with the driver's built-in codec for the OID. */
const codec = (oid: number, decode: (bytes: Uint8Array) => Result.Result<string, PgTypes.CodecError>): PgTypes.Codec<unknown> => ({
  encode: (value) => PgTypes.encode(value, oid),
  decode
})

const OID = PgTypes.OID

/** Types the driver would hand over as raw binary: refused by name, so the caller can cast. */
const WITHOUT_JSON_FORM: ReadonlyArray<readonly [number, string]> = [
  [600, "point"], [601, "lseg"], [602, "path"], [603, "box"], [604, "polygon"], [628, "line"], [718, "circle"],
  [790, "money"], [829, "macaddr"], [774, "macaddr8"], [1560, "bit"], [1562, "bit varying"],
  [3614, "tsvector"], [3615, "tsquery"], [2249, "record"],
  [3904, "int4range"], [3906, "numrange"], [3908, "tsrange"], [3910, "tstzrange"], [3912, "daterange"], [3926, "int8range"],
  [4451, "int4multirange"], [4532, "nummultirange"], [4533, "tsmultirange"], [4534, "tstzmultirange"], [4535, "datemultirange"],
  [4536, "int8multirange"]
]

/** The message of a result column that cannot be sent as JSON; SqlRunner recognises it. */
export const NO_JSON_FORM = "has no JSON form; cast it to text"

/** The registry the main and chat pools decode with. */
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
  for (const [oid, name] of WITHOUT_JSON_FORM) {
    registry.register(oid, codec(oid, () => Result.fail(new PgTypes.CodecError({ message: `a column of type ${name} ${NO_JSON_FORM}` }))))
  }
  return registry
}
