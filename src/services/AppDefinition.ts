/**
 * App definitions (issue #27): one app schema (or public's managed tables) as a JSON document,
 * `{"plinth_app": 1, ...}`, read from what Plinth recorded (sys.export_app in
 * sql/sys/15_app_definition.sql) and applied to a database through the same management functions
 * an owner calls, in one transaction. Schema only: rows, users, audit events and conversations
 * are not part of it. Both run as a database administrator (the `plinth app` command).
 */
import { Effect, Schema, SchemaIssue } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { databaseErrorFields, sqlState } from "./DatabaseError.ts"

const COLUMN_TYPES = [
  "text", "integer", "bigint", "numeric", "currency", "boolean", "date", "timestamp", "uuid", "json", "email", "url", "choice", "reference"
] as const

const Level = Schema.Literals(["all", "own", "none"])
const Permission = Schema.Struct({ read: Level, write: Level, delete: Level })

const ChoiceOption = Schema.Struct({
  value: Schema.String,
  label: Schema.optionalKey(Schema.NullOr(Schema.String)),
  color: Schema.optionalKey(Schema.NullOr(Schema.String))
})

/** A column spec exactly as sys.create_table and alter_table's add_column take it. */
export const ColumnSpec = Schema.Struct({
  name: Schema.String,
  type: Schema.Literals(COLUMN_TYPES),
  required: Schema.optionalKey(Schema.Boolean),
  unique: Schema.optionalKey(Schema.Boolean),
  default: Schema.optionalKey(Schema.String),
  label: Schema.optionalKey(Schema.String),
  display_type: Schema.optionalKey(Schema.String),
  options: Schema.optionalKey(Schema.Array(ChoiceOption)),
  references: Schema.optionalKey(Schema.String)
})
export type ColumnSpec = typeof ColumnSpec.Type

export const TableDefinition = Schema.Struct({
  name: Schema.String,
  description: Schema.optionalKey(Schema.String),
  display_columns: Schema.optionalKey(Schema.Array(Schema.String)),
  columns: Schema.Array(ColumnSpec),
  permissions: Schema.Struct({ staff: Permission, member: Permission, anon: Permission })
})
export type TableDefinition = typeof TableDefinition.Type

export const AppDefinition = Schema.Struct({
  plinth_app: Schema.Literal(1),
  /** The schema it was exported from; an import goes there unless told otherwise. */
  schema: Schema.String,
  /** Absent for public, which is not a registered app. */
  display_name: Schema.optionalKey(Schema.String),
  description: Schema.String,
  /** Role → page slug. */
  home_page: Schema.Record(Schema.String, Schema.String),
  tables: Schema.Array(TableDefinition),
  views: Schema.Array(Schema.Struct({ name: Schema.String, sql: Schema.String })),
  pages: Schema.Array(Schema.Struct({ slug: Schema.String, title: Schema.String, source: Schema.String }))
})
export type AppDefinition = typeof AppDefinition.Type

/** The definition does not decode or does not hold together; `message` names where. */
export class InvalidAppDefinition extends Schema.TaggedError<InvalidAppDefinition>()("InvalidAppDefinition", { message: Schema.String }) {}
export class AppNotFound extends Schema.TaggedError<AppNotFound>()("AppNotFound", { schema: Schema.String }) {}
/** The database refused a step (the target exists, a view does not compile, ...); nothing was kept. */
export class AppImportRefused extends Schema.TaggedError<AppImportRefused>()("AppImportRefused", { message: Schema.String }) {}

const formatIssues = SchemaIssue.makeFormatterStandardSchemaV1()
const decodeDefinition = Schema.decodeUnknownEffect(AppDefinition)

/** Path `tables[0].columns[1].type`: where in the document each issue is. */
const pathText = (path: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }>) =>
  path.map((segment) => typeof segment === "object" ? segment.key : segment).map((key, index) => typeof key === "number" ? `[${key}]` : index === 0 ? String(key) : `.${String(key)}`).join("") || "definition"

/** Decodes a definition; unknown keys are refused by name, not dropped. */
export const decode = (input: unknown): Effect.Effect<AppDefinition, InvalidAppDefinition> =>
  decodeDefinition(input, { errors: "all", onExcessProperty: "error" }).pipe(
    Effect.mapError((error) =>
      new InvalidAppDefinition({
        message: formatIssues(error.issue).issues.map((issue) => {
          const path = issue.path ?? []
          // The key is the last step of its path: said as the unknown key it is.
          return issue.message === "Expected no excess property" && path.length > 0
            ? `${pathText(path.slice(0, -1))}: unknown key ${JSON.stringify(pathText(path.slice(-1)))}`
            : `${pathText(path)}: ${issue.message}`
        }).join("; ")
      })
    ),
    Effect.flatMap((definition) => {
      const problem = inconsistency(definition)
      return problem === undefined ? Effect.succeed(definition) : Effect.fail(new InvalidAppDefinition({ message: problem }))
    })
  )

/** What the database would refuse half-way, said before anything starts: duplicates, references outside the definition. */
const inconsistency = (definition: AppDefinition): string | undefined => {
  const names = new Set<string>()
  for (const table of definition.tables) {
    if (names.has(table.name)) return `table ${table.name} appears twice`
    names.add(table.name)
  }
  for (const table of definition.tables) {
    for (const column of table.columns) {
      if (column.type === "reference" && column.references === undefined) {
        return `table ${table.name}: reference column ${column.name} needs "references"`
      }
      if (column.references !== undefined && !names.has(column.references)) {
        return `table ${table.name}: column ${column.name} references table ${column.references}, which the definition does not have`
      }
    }
  }
  return undefined
}

/**
 * Tables in an order where each comes after the tables it references (a table may reference
 * itself); the tables of a cycle follow in name order.
 */
export const dependencyOrder = (tables: ReadonlyArray<TableDefinition>): ReadonlyArray<TableDefinition> => {
  const placed = new Set<string>()
  const ordered: Array<TableDefinition> = []
  let remaining = [...tables].sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
  while (remaining.length > 0) {
    const ready = remaining.filter((table) =>
      table.columns.every((column) => column.references === undefined || column.references === table.name || placed.has(column.references))
    )
    const next = ready.length > 0 ? ready : [remaining[0]!]
    for (const table of next) {
      placed.add(table.name)
      ordered.push(table)
    }
    remaining = remaining.filter((table) => !placed.has(table.name))
  }
  return ordered
}

/** The definition of app schema `schema` (or `public`), its tables in dependency order. */
export const exportApp = Effect.fn("AppDefinition.export")(function*(schema: string) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ definition: unknown }>`SELECT sys.export_app(${schema}) AS definition`.pipe(
    Effect.catchIf((error) => sqlState(error) === "P0002", () => Effect.fail(new AppNotFound({ schema })))
  )
  // Decoded as an import would: a definition Plinth writes is one Plinth reads.
  const definition = yield* decode(rows[0]!.definition)
  return { ...definition, tables: dependencyOrder(definition.tables) } satisfies AppDefinition
})

/** What create_table gives every table until set_table_permissions says otherwise. */
const DEFAULT_PERMISSIONS: TableDefinition["permissions"] = {
  staff: { read: "all", write: "all", delete: "all" },
  member: { read: "own", write: "own", delete: "own" },
  anon: { read: "none", write: "none", delete: "none" }
}

export interface ImportResult {
  readonly schema: string
  readonly tables: number
  readonly views: number
  readonly pages: number
}

const refusedAt = (what: string) => (error: SqlError.SqlError) =>
  new AppImportRefused({ message: `${what}: ${databaseErrorFields(error).message}` })

/**
 * Applies `definition` to schema `target` (a new app; or public, when it has no managed tables,
 * views or pages yet), all in one transaction, through the management functions, so triggers,
 * policies, indexes, read views and audit events are what an owner's calls would have made.
 */
export const importApp = Effect.fn("AppDefinition.import")(function*(definition: AppDefinition, target: string) {
  const sql = yield* SqlClient.SqlClient
  const json = (value: unknown) => JSON.stringify(value)
  return yield* sql.withTransaction(Effect.gen(function*() {
    if (target === "public") {
      const [used] = yield* sql<{ used: boolean }>`
        SELECT EXISTS (SELECT FROM sys.table_metadata WHERE schema_name = 'public')
          OR EXISTS (SELECT FROM sys.managed_views WHERE schema_name = 'public')
          OR EXISTS (SELECT FROM sys.pages WHERE schema_name = 'public') AS used`
      if (used!.used) {
        return yield* new AppImportRefused({ message: "public already has managed tables, views or pages; import into a new app with --as <schema>" })
      }
      yield* sql`SELECT set_config('app.app_id', '', true)`
      yield* sql`INSERT INTO sys.settings (key, value)
        VALUES ('public_app', ${json({ description: definition.description, home_page: definition.home_page })}::jsonb)
        ON CONFLICT (key) DO UPDATE SET value = excluded.value`
    } else {
      const [exists] = yield* sql<{ exists: boolean }>`SELECT EXISTS (SELECT FROM sys.apps WHERE schema_name = ${target}) AS exists`
      if (exists!.exists) {
        return yield* new AppImportRefused({ message: `app ${target} already exists; import under another name with --as <schema>` })
      }
      const [app] = yield* sql<{ id: string }>`
        SELECT (sys.create_app(${target}, ${definition.display_name ?? target}, ${definition.description}) ->> 'id') AS id`.pipe(
        Effect.mapError(refusedAt(`app ${target}`))
      )
      yield* sql`UPDATE sys.apps SET home_page = ${json(definition.home_page)}::jsonb WHERE id = ${app!.id}::uuid`
      // The management functions work in the app of app.app_id, as for a request with X-App-Schema.
      yield* sql`SELECT set_config('app.app_id', ${app!.id}, true)`
    }

    // A column that references a table made later (a cycle) is added once every table exists.
    const made = new Set<string>()
    const later: Array<{ table: string; column: ColumnSpec }> = []
    for (const table of dependencyOrder(definition.tables)) {
      const now = table.columns.filter((column) => column.references === undefined || column.references === table.name || made.has(column.references))
      for (const column of table.columns) if (!now.includes(column)) later.push({ table: table.name, column })
      yield* sql`SELECT sys.create_table(${table.name}, ${json(now)}::jsonb)`.pipe(Effect.mapError(refusedAt(`table ${table.name}`)))
      made.add(table.name)
    }
    for (const { column, table } of later) {
      yield* sql`SELECT sys.alter_table(${table}, ${json([{ op: "add_column", column }])}::jsonb)`.pipe(
        Effect.mapError(refusedAt(`table ${table}`))
      )
    }
    for (const table of definition.tables) {
      if (table.display_columns !== undefined && table.display_columns.length > 0) {
        yield* sql`SELECT sys.alter_table(${table.name}, ${json([{ op: "set_display_columns", columns: table.display_columns }])}::jsonb)`.pipe(
          Effect.mapError(refusedAt(`table ${table.name}`))
        )
      }
      // No management function sets a table's description; it is the metadata row's alone.
      if (table.description !== undefined && table.description !== "") {
        yield* sql`UPDATE sys.table_metadata SET description = ${table.description}
          WHERE schema_name = ${target} AND table_name = ${table.name}`
      }
      for (const role of ["staff", "member", "anon"] as const) {
        const wanted = table.permissions[role]
        const given = DEFAULT_PERMISSIONS[role]
        if (wanted.read === given.read && wanted.write === given.write && wanted.delete === given.delete) continue
        yield* sql`SELECT sys.set_table_permissions(${table.name}, ${role}, ${wanted.read}, ${wanted.write}, ${wanted.delete})`.pipe(
          Effect.mapError(refusedAt(`permissions of ${role} on table ${table.name}`))
        )
      }
    }
    for (const view of definition.views) {
      yield* sql`SELECT sys.create_view(${view.name}, ${view.sql})`.pipe(Effect.mapError(refusedAt(`view ${view.name}`)))
    }
    for (const page of definition.pages) {
      yield* sql`SELECT sys.create_page(${page.slug}, ${page.title}, ${page.source})`.pipe(Effect.mapError(refusedAt(`page ${page.slug}`)))
    }
    return { schema: target, tables: definition.tables.length, views: definition.views.length, pages: definition.pages.length } satisfies ImportResult
  }))
})
