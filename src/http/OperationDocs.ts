/**
 * How an endpoint reads in `/openapi.json`: its summary and description, and the `X-App-Schema`
 * header where it reads one. Apart from the document's builder (OpenApiDocument.ts), which is
 * server code, because the API definitions that use it are also the client's (`plinth/client`).
 */
import { OpenApi } from "effect/http-api"

const APP_SCHEMA_PARAMETER = {
  name: "X-App-Schema",
  in: "header",
  required: false,
  description: "The app the request works in (its schema name). Absent or `public`: the public schema; malformed or not an app: 400.",
  schema: { type: "string", maxLength: 63 }
}

/**
 * An endpoint's summary and description in `/openapi.json`; `appSchema` when it reads `X-App-Schema`.
 * For `.annotateMerge(...)` on an endpoint definition.
 */
export const documented = (options: { readonly summary: string; readonly description?: string; readonly appSchema?: boolean }) =>
  OpenApi.annotations({
    summary: options.summary,
    ...(options.description === undefined ? {} : { description: options.description }),
    ...(options.appSchema === true
      ? { transform: (operation) => ({ ...operation, parameters: [...(operation["parameters"] ?? []), APP_SCHEMA_PARAMETER] }) }
      : {})
  })
