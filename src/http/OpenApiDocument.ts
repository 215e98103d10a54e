/**
 * Each service's `/openapi.json`: what Effect generates from the API definitions, completed with
 * what every route shares and the definitions cannot say (HttpServerLive.ts, TenantSelection.ts):
 * the body limit and JSON check (413, 415) of every endpoint with a body, the tenant's header and
 * answers (400, 404, 503), `X-Request-Id`, Plinth's name and version, and objects of unknown values
 * written out as such (`additionalProperties: true`), which generators otherwise read as empty.
 */
import { Effect, Layer } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import type { HttpApi, HttpApiGroup } from "effect/http-api"
import { OpenApi } from "effect/http-api"
import { readFileSync } from "node:fs"
import { TENANT_NAME } from "../services/TenantName.ts"
import { statusMessage } from "./Errors.ts"
import { MAX_BODY_SIZE, SaneRequestId } from "./HttpServerLive.ts"
import { PROCESS_PATHS } from "./TenantSelection.ts"

// The document as plain JSON: Effect's OpenAPISpec types know no `$ref` parameters or headers.
type Json = Record<string, unknown>

/** Plinth's version: that of the package.json the running code belongs to (in `src/` or in `dist/src/`). */
const packageVersion = (): string => {
  for (let dir = new URL(".", import.meta.url); ; dir = new URL("..", dir)) {
    try {
      const found = JSON.parse(readFileSync(new URL("package.json", dir), "utf8")) as { name?: unknown; version?: unknown }
      if (found.name === "plinth" && typeof found.version === "string") return found.version
    } catch {
      // No (readable) package.json here: look one directory up.
    }
    if (new URL("..", dir).href === dir.href) return "0.0.0"
  }
}

const ref = (kind: "schemas" | "parameters" | "headers", name: string) => ({ $ref: `#/components/${kind}/${name}` })

const plainResponse = (description: string) => ({ description, content: { "application/json": { schema: ref("schemas", "Error") } } })

/** Answers every route with a body can give before its handler runs (HttpServerLive.ts, Validation.ts). */
const BODY_RESPONSES: Record<number, string> = {
  413: `The body is over ${Number(MAX_BODY_SIZE) / 1024 / 1024} MiB.`,
  415: `The body is not JSON: ${statusMessage(415)}.`
}

/** Answers of the tenant selection (multi-tenant mode), before any route. */
const TENANT_RESPONSES: Record<number, string> = {
  400: "Multi-tenant mode: `X-Tenant` missing or malformed.",
  404: "Multi-tenant mode: the tenant `X-Tenant` names is not registered.",
  503: "Multi-tenant mode: too many live tenants, or the tenant's database is unavailable."
}

/** What any request may meet before (or instead of) its route, too common to list on every operation. */
const BEFORE_ANY_ROUTE = "Any request may also be answered 408 (it took over 10 s to send its headers or 30 s in all), " +
  "431 (headers over 16 KiB) or 500 (a bug, logged with the request's id), each as `{error: string}`."

const addResponse = (responses: Record<string, Json>, status: number, description: string) => {
  const existing = responses[status]
  if (existing === undefined) responses[status] = plainResponse(description)
  else existing["description"] = `${String(existing["description"])} | ${description}`
}

/** `{type: "object"}` with nothing said about its keys: an object of any keys and values (a row, a tool's arguments). */
const openObjects = (node: unknown): void => {
  if (Array.isArray(node)) return node.forEach(openObjects)
  if (typeof node !== "object" || node === null) return
  const schema = node as Json
  if (
    schema["type"] === "object" && schema["properties"] === undefined && schema["additionalProperties"] === undefined &&
    schema["patternProperties"] === undefined && schema["$ref"] === undefined
  ) {
    schema["additionalProperties"] = true
  }
  Object.values(schema).forEach(openObjects)
}

export interface DocumentInfo {
  readonly title: string
  readonly description: string
}

/** The OpenAPI 3.1 document of `api`, as its service answers. */
export const openApiDocument = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>,
  info: DocumentInfo
): Json => {
  const document = OpenApi.fromApi(api) as unknown as Json & { paths: Record<string, Record<string, Json>>; components: Json }
  document["info"] = { title: info.title, version: packageVersion(), description: `${info.description} ${BEFORE_ANY_ROUTE}` }
  document["servers"] = [{ url: "/", description: "this service" }]
  const components = document.components
  components["schemas"] = {
    ...(components["schemas"] as Json),
    Error: {
      type: "object",
      description: "Shape 1 of every error answer: what is wrong, in one line.",
      properties: { error: { type: "string" } },
      required: ["error"],
      additionalProperties: false
    }
  }
  components["parameters"] = {
    RequestId: {
      name: "X-Request-Id",
      in: "header",
      required: false,
      description: "The caller's id for the request (1–64 of `[A-Za-z0-9._-]`); echoed on the response and in the log. Otherwise a fresh UUID.",
      schema: { type: "string", pattern: SaneRequestId.source }
    },
    Tenant: {
      name: "X-Tenant",
      in: "header",
      required: false,
      description:
        "Multi-tenant mode only, and there required: the tenant's name. Missing or malformed: 400; unknown: 404; a token of another tenant: 403.",
      schema: { type: "string", pattern: TENANT_NAME.source }
    }
  }
  components["headers"] = {
    RequestId: { description: "The request's id: the caller's `X-Request-Id` when sane, else a fresh UUID.", schema: { type: "string" } },
    RetryAfter: { description: "Seconds to wait before trying again.", required: true, schema: { type: "string", pattern: "^[0-9]+$" } }
  }
  for (const [path, operations] of Object.entries(document.paths)) {
    const tenantBound = !PROCESS_PATHS.has(path)
    for (const operation of Object.values(operations)) {
      const responses = operation["responses"] as Record<string, Json>
      const parameters = operation["parameters"] as Array<Json>
      // The API-wide 400 of request decoding: the process's own endpoints decode nothing.
      if (!tenantBound) delete responses[400]
      if (operation["requestBody"] !== undefined) {
        for (const [status, description] of Object.entries(BODY_RESPONSES)) addResponse(responses, Number(status), description)
      }
      if (tenantBound) {
        parameters.push(ref("parameters", "Tenant"))
        for (const [status, description] of Object.entries(TENANT_RESPONSES)) addResponse(responses, Number(status), description)
      }
      parameters.push(ref("parameters", "RequestId"))
      for (const response of Object.values(responses)) {
        const headers: Json = { ...(response["headers"] as Json | undefined), "X-Request-Id": ref("headers", "RequestId") }
        // The header of RateLimited, said in full (the schema only knows it as text).
        if (headers["retry-after"] !== undefined) headers["retry-after"] = ref("headers", "RetryAfter")
        response["headers"] = headers
      }
    }
  }
  openObjects(document.paths)
  openObjects(components["schemas"])
  return document
}

/** `GET /openapi.json`: the document, built on the first request for it rather than at every start. */
export const openApiRoute = <Id extends string, Groups extends HttpApiGroup.Constraint>(api: HttpApi.HttpApi<Id, Groups>, info: DocumentInfo) =>
  Layer.unwrap(Effect.sync(() => {
    let response: HttpServerResponse.HttpServerResponse | undefined
    return HttpRouter.add("GET", "/openapi.json", Effect.sync(() => (response ??= HttpServerResponse.jsonUnsafe(openApiDocument(api, info)))))
  }))
