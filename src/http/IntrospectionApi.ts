/** POST / (spec §4.3): the schema as the caller sees it (definition only). */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { Authentication } from "./ApiMiddleware.ts"
import { BadRequest, Unavailable } from "./Errors.ts"

/** Spec §2.5; the inner shapes are documented in README.md ("Introspection"). */
export const IntrospectionBody = Schema.Struct({
  relations: Schema.Array(Schema.Unknown),
  keys: Schema.Array(Schema.Unknown),
  stats: Schema.Array(Schema.Struct({ relname: Schema.String, number_rows: Schema.Number })),
  table_metadata: Schema.Record(Schema.String, Schema.Unknown),
  app_metadata: Schema.Struct({ app_description: Schema.String, home_page: Schema.Record(Schema.String, Schema.String) }),
  column_metadata: Schema.Record(Schema.String, Schema.Unknown),
  apps: Schema.Array(Schema.Unknown),
  curr_role: Schema.String
})

export class IntrospectionApi extends HttpApiGroup.make("introspection")
  .add(HttpApiEndpoint.post("introspect", "/", {
    payload: Schema.Struct({}),
    success: IntrospectionBody,
    error: [BadRequest, Unavailable]
  }))
  .middleware(Authentication)
{}
