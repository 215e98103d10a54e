/**
 * Shared pieces of the managed-schema tests: one signed-in user per role, calls of the sys.*
 * management functions through POST /sql, POST / (introspection), and superuser probes of the
 * catalog (and of the anon role, which has no HTTP face on these endpoints).
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { expect } from "vitest"
import { databaseErrorFields } from "../../src/services/DatabaseError.ts"
import { type AuthStack, type JsonResponse, post, type SignIn, signedIn } from "../support/auth.ts"
import { query, runSql } from "../support/database.ts"
import { eventually } from "../support/eventually.ts"

export type Role = "owner" | "admin" | "staff" | "member"
export const ROLES: ReadonlyArray<Role> = ["owner", "admin", "staff", "member"]

export interface Users {
  readonly owner: SignIn
  readonly admin: SignIn
  readonly staff: SignIn
  readonly member: SignIn
  /** A second member, to tell "own rows" from "all rows". */
  readonly member2: SignIn
}

export const signInAll = async (stack: AuthStack): Promise<Users> => ({
  owner: await signedIn(stack, "owner@plinth.test", "owner"),
  admin: await signedIn(stack, "admin@plinth.test", "admin"),
  staff: await signedIn(stack, "staff@plinth.test", "staff"),
  member: await signedIn(stack, "member@plinth.test", "member"),
  member2: await signedIn(stack, "member2@plinth.test", "member")
})

/** `{ rows, rowCount }` of a successful POST /sql. */
export interface SqlBody<Row = Record<string, unknown>> {
  readonly rows: ReadonlyArray<Row>
  readonly rowCount: number
}

/** The structured database error of spec §7. */
export interface DatabaseErrorBody {
  readonly error: {
    readonly message: string
    readonly code: string
    readonly detail: string | null
    readonly hint: string | null
    readonly position: number | null
  }
}

let counter = 0
/** A table (or view, or app) name no other test of the file uses. */
export const fresh = (prefix: string) => `${prefix}_${++counter}_${Math.random().toString(36).slice(2, 7)}`

/** The X-App-Schema header, or none. */
export const appHeader = (app: string | undefined): Record<string, string> => (app === undefined ? {} : { "x-app-schema": app })

/** POST /sql as `user`, optionally in an app. */
export const sql = <Row = Record<string, unknown>>(
  stack: AuthStack,
  user: SignIn,
  text: string,
  params: ReadonlyArray<unknown> = [],
  app?: string
): Promise<JsonResponse<SqlBody<Row>>> => post<SqlBody<Row>>(stack.main.url, "/sql", { sql: text, params }, { token: user.token, headers: appHeader(app) })

/** `SELECT <call> AS r` through POST /sql: the way every jsonb-returning sys function is called. */
export const call = (stack: AuthStack, user: SignIn, expression: string, params: ReadonlyArray<unknown> = [], app?: string) =>
  sql<{ r: Record<string, unknown> }>(stack, user, `SELECT ${expression} AS r`, params, app)

/** A column spec of sys.create_table / add_column. */
export interface ColumnSpec {
  readonly name: string
  readonly type?: string
  readonly required?: boolean
  readonly unique?: boolean
  readonly default?: unknown
  readonly label?: string
  readonly display_type?: string
  readonly options?: ReadonlyArray<{ readonly value: string; readonly label?: string; readonly color?: string | null }>
  readonly references?: string
}

export const createTable = (stack: AuthStack, user: SignIn, name: string, columns: ReadonlyArray<unknown>, app?: string) =>
  call(stack, user, "sys.create_table($1, $2::jsonb)", [name, columns], app)

export const alterTable = (stack: AuthStack, user: SignIn, name: string, operations: ReadonlyArray<unknown>, app?: string) =>
  call(stack, user, "sys.alter_table($1, $2::jsonb)", [name, operations], app)

/**
 * INSERTs one row as `user` and asserts 200 with rowCount 1. (Rows are read back with a SELECT:
 * POST /sql does not answer the rows of INSERT … RETURNING, see test/sql/Sql.test.ts.)
 */
export const insert = async (stack: AuthStack, user: SignIn, table: string, row: Readonly<Record<string, unknown>>, app?: string) => {
  const columns = Object.keys(row)
  const text = columns.length === 0
    ? `INSERT INTO ${table} DEFAULT VALUES`
    : `INSERT INTO ${table} (${columns.join(", ")}) VALUES (${columns.map((_, i) => `$${i + 1}`).join(", ")})`
  const response = await sql(stack, user, text, Object.values(row), app)
  expect({ status: response.status, body: response.body }).toEqual({ status: 200, body: { rows: [], rowCount: 1 } })
}

/** Asserts a 200 and returns the body's rows. */
export const ok = <Row>(response: JsonResponse<SqlBody<Row>>): ReadonlyArray<Row> => {
  if (response.status !== 200) throw new Error(`expected 200, got ${response.status}: ${JSON.stringify(response.body)}`)
  expect(response.body).toEqual({ rows: expect.any(Array), rowCount: expect.any(Number) })
  return response.body.rows
}

/** The single `r` of a `SELECT sys.f(...) AS r` that must succeed. */
export const result = (response: JsonResponse<SqlBody<{ r: Record<string, unknown> }>>): Record<string, unknown> => {
  const rows = ok(response)
  expect(rows).toHaveLength(1)
  return rows[0]!.r
}

/** Asserts the structured error of spec §7 with this status and SQLSTATE; the message must match. */
export const expectDbError = (response: JsonResponse<unknown>, status: number, code: string, message?: RegExp | string) => {
  expect({ status: response.status, body: response.body }).toMatchObject({
    status,
    body: {
      error: {
        code,
        message: message === undefined ? expect.any(String) : typeof message === "string" ? expect.stringContaining(message) : expect.stringMatching(message)
      }
    }
  })
  const error = (response.body as DatabaseErrorBody).error
  expect(Object.keys(error).sort()).toEqual(["code", "detail", "hint", "message", "position"])
}

/** 403 42501: the management functions are for owners and admins. */
export const expectForbidden = (response: JsonResponse<unknown>) => expectDbError(response, 403, "42501")

/** Runs a query as the superuser of the test database. */
export const admin = <Row extends object = Record<string, unknown>>(stack: AuthStack, text: string, params: ReadonlyArray<unknown> = []) =>
  query(stack.db.adminUrl, (client) => client.unsafe<Row>(text, params as Array<unknown>))

/** Whether a relation exists (`to_regclass`), as the superuser. */
export const exists = async (stack: AuthStack, qualified: string): Promise<boolean> => {
  const rows = await admin<{ found: boolean }>(stack, "SELECT to_regclass($1) IS NOT NULL AS found", [qualified])
  return rows[0]!.found
}

/** The outcome of a statement run as a role through a superuser connection. */
export type RoleOutcome<Row> = { readonly ok: true; readonly rows: ReadonlyArray<Row> } | { readonly ok: false; readonly code: string | undefined; readonly message: string }

/** Runs `text` as `role` (with app.user_id) in a transaction: how anon is checked, it has no token. */
export const asRole = <Row extends object = Record<string, unknown>>(
  stack: AuthStack,
  role: string,
  userId: string,
  text: string,
  params: ReadonlyArray<unknown> = []
): Promise<RoleOutcome<Row>> =>
  runSql(stack.db.adminUrl, Effect.gen(function*() {
    const client = yield* SqlClient.SqlClient
    return yield* client.withTransaction(Effect.gen(function*() {
      yield* client`SELECT set_config('role', ${role}, true), set_config('app.user_id', ${userId}, true)`
      return yield* client.unsafe<Row>(text, params as Array<unknown>)
    })).pipe(Effect.match({
      onSuccess: (rows): RoleOutcome<Row> => ({ ok: true, rows }),
      onFailure: (error): RoleOutcome<Row> => {
        const fields = databaseErrorFields(error)
        return { ok: false, code: fields.code, message: fields.message }
      }
    }))
  }))

/** The answer of POST / (spec §2.5). */
export interface Relation {
  readonly table_name: string
  readonly schema_name: string
  readonly kind: string
  readonly cols: ReadonlyArray<{ readonly name: string; readonly type: string; readonly nullable: boolean; readonly has_default: boolean }>
  readonly can_select: boolean
  readonly can_insert: boolean
  readonly can_update: boolean
  readonly can_delete: boolean
  readonly write_target: string | null
  readonly is_managed: boolean
  /** Plinth's own (the chat's views): generic clients leave it out. */
  readonly is_system: boolean
}

export interface KeyRecord {
  readonly constraint_name: string
  readonly constraint_type: string
  readonly source_schema: string
  readonly source_table: string
  readonly source_columns: ReadonlyArray<string>
  readonly target_schema: string | null
  readonly target_table: string | null
  readonly target_columns: ReadonlyArray<string> | null
}

export interface ColumnMeta {
  readonly display_type: string
  readonly label?: string
  readonly options?: ReadonlyArray<{ readonly value: string; readonly label?: string; readonly color?: string | null }>
  readonly column_type?: string
  readonly reference_table?: string
}

export interface Introspection {
  readonly relations: ReadonlyArray<Relation>
  readonly keys: ReadonlyArray<KeyRecord>
  readonly stats: ReadonlyArray<{ readonly relname: string; readonly number_rows: number }>
  readonly table_metadata: Readonly<Record<string, { readonly display_columns: ReadonlyArray<string>; readonly description?: string }>>
  readonly app_metadata: { readonly app_description: string; readonly home_page: Readonly<Record<string, string>> }
  readonly column_metadata: Readonly<Record<string, Readonly<Record<string, ColumnMeta>>>>
  readonly apps: ReadonlyArray<{ readonly id: string; readonly schema_name: string; readonly display_name: string; readonly description?: string }>
  readonly curr_role: string
}

export const INTROSPECTION_KEYS = ["app_metadata", "apps", "column_metadata", "curr_role", "keys", "relations", "stats", "table_metadata"]

/** POST / with `{}`; asserts 200 and the eight keys. */
export const introspect = async (stack: AuthStack, user: SignIn, app?: string): Promise<Introspection> => {
  const response = await post<Introspection>(stack.main.url, "/", {}, { token: user.token, headers: appHeader(app) })
  if (response.status !== 200) throw new Error(`POST / answered ${response.status}: ${JSON.stringify(response.body)}`)
  expect(Object.keys(response.body).sort()).toEqual(INTROSPECTION_KEYS)
  return response.body
}

export const relation = (schema: Introspection, table: string, schemaName = "public") =>
  schema.relations.find((r) => r.table_name === table && r.schema_name === schemaName)

/** Polls POST / until `probe` holds for its answer (the cache follows NOTIFY plinth_catalog), then returns that answer. */
export const introspectUntil = async (
  stack: AuthStack,
  user: SignIn,
  probe: (schema: Introspection) => boolean,
  app?: string,
  timeoutMs = 2_000
): Promise<Introspection> => {
  let last: Introspection | undefined
  const held = await eventually(async () => probe(last = await introspect(stack, user, app)), timeoutMs)
  if (!held) throw new Error(`introspection did not reach the expected state within ${timeoutMs} ms`)
  return last!
}
