/** POST / (spec §2.5, §4.3): the schema as the caller sees it (definition only). */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { Authentication } from "./ApiMiddleware.ts"
import { BadRequest, Unavailable } from "./Errors.ts"
import { documented } from "./OperationDocs.ts"

// The shapes sys.introspect() and sys.table_stats() build (sql/sys/07_introspection.sql).

const Column = Schema.Struct({
  name: Schema.String,
  /** The SQL type, as format_type writes it. */
  type: Schema.String,
  nullable: Schema.Boolean,
  has_default: Schema.Boolean,
  default: Schema.NullOr(Schema.String),
  position: Schema.Int,
  is_generated: Schema.Boolean,
  can_select: Schema.Boolean,
  can_insert: Schema.Boolean,
  can_update: Schema.Boolean
}).annotate({ identifier: "IntrospectedColumn" })

const Relation = Schema.Struct({
  table_name: Schema.String,
  schema_name: Schema.String,
  kind: Schema.Literals(["table", "view", "materialized_view", "foreign_table"]),
  cols: Schema.Array(Column),
  can_select: Schema.Boolean,
  can_insert: Schema.Boolean,
  can_update: Schema.Boolean,
  can_delete: Schema.Boolean,
  /** The table to write to: a read view's base table, null for a table with a read view and for other views. */
  write_target: Schema.NullOr(Schema.String),
  is_managed: Schema.Boolean,
  /** Plinth's own relations (the chat's views), which a generic client leaves out. */
  is_system: Schema.Boolean
}).annotate({ identifier: "Relation" })

const Key = Schema.Struct({
  constraint_name: Schema.String,
  constraint_type: Schema.Literals(["PRIMARY KEY", "FOREIGN KEY", "UNIQUE"]),
  source_schema: Schema.String,
  source_table: Schema.String,
  source_columns: Schema.Array(Schema.String),
  /** The referenced table's (foreign keys only; null otherwise). */
  target_schema: Schema.NullOr(Schema.String),
  target_table: Schema.NullOr(Schema.String),
  target_columns: Schema.NullOr(Schema.Array(Schema.String))
}).annotate({ identifier: "Key" })

const TableStats = Schema.Struct({
  relname: Schema.String,
  /** Exact below 100,000 estimated rows, the planner's estimate above. */
  number_rows: Schema.Number
}).annotate({ identifier: "TableStats" })

const TableMetadata = Schema.Struct({
  display_columns: Schema.Array(Schema.String),
  description: Schema.String
}).annotate({ identifier: "TableMetadata" })

/** What a choice's spec gave (usually strings; `color` may be null); sys.create_table checks the keys, not their types. */
const OptionValue = Schema.Union([Schema.String, Schema.Number, Schema.Boolean])
const ChoiceOption = Schema.Struct({
  value: OptionValue,
  label: Schema.optionalKey(Schema.NullOr(OptionValue)),
  color: Schema.optionalKey(Schema.NullOr(OptionValue))
}).annotate({ identifier: "ChoiceOption" })

/** Keys a column does not have are absent. */
const ColumnMetadata = Schema.Struct({
  display_type: Schema.String,
  /** The column-spec type (text, currency, choice, reference, …), not the SQL type. */
  column_type: Schema.String,
  label: Schema.optionalKey(Schema.String),
  options: Schema.optionalKey(Schema.Array(ChoiceOption)),
  reference_table: Schema.optionalKey(Schema.String)
}).annotate({ identifier: "ColumnMetadata" })

/** Role → the slug of its home page. */
const HomePage = Schema.Record(Schema.String, Schema.String)

const App = Schema.Struct({
  id: Schema.String,
  schema_name: Schema.String,
  display_name: Schema.String,
  description: Schema.String,
  home_page: HomePage
}).annotate({ identifier: "App" })

/** Spec §2.5; docs/api.md ("POST /") describes each part. */
export const IntrospectionBody = Schema.Struct({
  relations: Schema.Array(Relation),
  keys: Schema.Array(Key),
  stats: Schema.Array(TableStats),
  /** By table name. */
  table_metadata: Schema.Record(Schema.String, TableMetadata),
  app_metadata: Schema.Struct({ app_description: Schema.String, home_page: HomePage }),
  /** By table name, then column name. */
  column_metadata: Schema.Record(Schema.String, Schema.Record(Schema.String, ColumnMetadata)),
  apps: Schema.Array(App),
  curr_role: Schema.String
})

export class IntrospectionApi extends HttpApiGroup.make("introspection")
  .add(HttpApiEndpoint.post("introspect", "/", {
    payload: Schema.Struct({}),
    success: IntrospectionBody,
    error: [BadRequest, Unavailable]
  }).annotateMerge(documented({
    summary: "Describe the schema as the caller sees it",
    description: "The relations, keys, row counts, metadata and apps the caller's role can see, for a client to draw its screens; " +
      "with `X-App-Schema` the app's relations come first, then public's.",
    appSchema: true
  })))
  .middleware(Authentication)
{}
