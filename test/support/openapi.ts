/**
 * A service's `/openapi.json` as a checker of live answers: `check` says what about a response the
 * document does not allow (an undocumented status or content type, a body its schema refuses, a
 * required header missing), `call` fetches and checks in one go, and `seen` collects every
 * `METHOD /path/{template} status` checked, for tests that want each documented status provoked.
 * Schemas are checked with ajv's JSON Schema 2020-12 (OpenAPI 3.1's dialect), `$ref`s to the
 * document's components resolved. An event stream documented as a string is checked as one; one
 * documented by its events' schema (Effect's `StreamSse`) is checked frame by frame.
 */
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js"

type Json = Record<string, unknown>

export interface OpenApiDocument {
  readonly openapi: string
  readonly info: { readonly title: string; readonly version: string; readonly description?: string }
  readonly servers?: ReadonlyArray<{ readonly url: string }>
  readonly paths: Readonly<Record<string, Readonly<Record<string, Operation>>>>
  readonly components: Json
}

export interface Operation {
  readonly summary?: string
  readonly parameters?: ReadonlyArray<Json>
  readonly requestBody?: Json
  readonly responses: Readonly<Record<string, DocumentedResponse>>
}

interface DocumentedResponse {
  readonly description: string
  readonly headers?: Readonly<Record<string, Json>>
  readonly content?: Readonly<Record<string, { readonly schema: Json }>>
}

/** What a checked response was: its status, headers, and body (parsed when JSON, else its text). */
export interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly body: unknown
}

export interface OpenApiChecker {
  readonly document: OpenApiDocument
  /** What is wrong with `answer` as the answer to `method path` (a concrete path, query allowed); empty when nothing. */
  readonly check: (method: string, path: string, answer: Answer) => ReadonlyArray<string>
  /** Fetches `path` of the service, reads the whole answer and checks it; fails (throws) when the document does not allow it. */
  readonly call: (method: string, path: string, options?: CallOptions) => Promise<Answer>
  /** `METHOD /template status` of every answer checked so far. */
  readonly seen: ReadonlySet<string>
  /** `METHOD /template status` of every status the document gives. */
  readonly documented: () => ReadonlyArray<string>
  /** The same document checking another server of the same service (a sibling started with other settings), adding to the same `seen`. */
  readonly at: (serviceUrl: string) => OpenApiChecker
}

export interface CallOptions {
  readonly token?: string
  /** JSON-encoded unless a string. */
  readonly body?: unknown
  readonly headers?: Record<string, string>
  /** For a stream that does not end (GET /events): read until the text has this, then disconnect. */
  readonly readUntil?: string
}

/** The whole body's text, or with `until` what arrived until it appeared (then the connection is cut). */
const readText = async (response: Response, controller: AbortController, until: string | undefined) => {
  if (until === undefined || response.body === null) return response.text()
  const reader = response.body.getReader()
  const decoder = new TextDecoder()
  let text = ""
  while (!text.includes(until)) {
    const chunk = await reader.read()
    if (chunk.done) break
    text += decoder.decode(chunk.value, { stream: true })
  }
  controller.abort()
  await reader.cancel().catch(() => undefined)
  return text
}

const COMPONENTS_ID = "https://plinth.invalid/openapi/components"
/** The components with JSON text (an SSE event's `data`) as the value it encodes. */
const DECODED_COMPONENTS_ID = "https://plinth.invalid/openapi/components-decoded"

/** `#/components/schemas/...` pointers made absolute, so that schemas compiled on their own still reach the components. */
const absoluteRefs = (node: unknown, id = COMPONENTS_ID): unknown => {
  if (Array.isArray(node)) return node.map((item) => absoluteRefs(item, id))
  if (typeof node !== "object" || node === null) return node
  return Object.fromEntries(Object.entries(node).map(([key, value]) =>
    key === "$ref" && typeof value === "string" && value.startsWith("#/components/schemas/")
      ? [key, `${id}#/$defs/${value.slice("#/components/schemas/".length)}`]
      : [key, absoluteRefs(value, id)]
  ))
}

/** A string schema of JSON text (`contentMediaType: application/json` with its `contentSchema`) replaced by the schema of the value. */
const decodedJson = (node: unknown): unknown => {
  if (Array.isArray(node)) return node.map(decodedJson)
  if (typeof node !== "object" || node === null) return node
  const schema = node as Json
  if (schema["contentMediaType"] === "application/json" && schema["contentSchema"] !== undefined) return decodedJson(schema["contentSchema"])
  return Object.fromEntries(Object.entries(schema).map(([key, value]) => [key, decodedJson(value)]))
}

/** The events of an SSE text (comments left out), as an SSE event schema sees them. */
const sseFrames = (text: string) =>
  text.split("\n\n").flatMap((frame) => {
    const fields = frame.split("\n").filter((line) => line !== "" && !line.startsWith(":")).map((line) => {
      const colon = line.indexOf(":")
      return colon < 0 ? [line, ""] as const : [line.slice(0, colon), line.slice(colon + 1).replace(/^ /, "")] as const
    })
    if (fields.length === 0) return []
    const event = fields.find(([name]) => name === "event")?.[1]
    const id = fields.find(([name]) => name === "id")?.[1]
    const data = fields.filter(([name]) => name === "data").map(([, value]) => value).join("\n")
    return [{ ...(event === undefined ? {} : { event }), ...(id === undefined ? {} : { id }), data }]
  })

const templateMatcher = (template: string) => new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\{[^}]+\}/g, "[^/]+")}$`)

const mediaType = (contentType: string | null) => (contentType ?? "").split(";")[0]!.trim().toLowerCase()

/** The checker of the document `service` serves at `/openapi.json`. */
export const openApiChecker = async (serviceUrl: string): Promise<OpenApiChecker> => {
  const response = await fetch(`${serviceUrl}/openapi.json`)
  if (response.status !== 200) throw new Error(`GET /openapi.json: ${response.status}`)
  return checkerOf((await response.json()) as OpenApiDocument, serviceUrl)
}

export const checkerOf = (document: OpenApiDocument, serviceUrl = "", seen = new Set<string>()): OpenApiChecker => {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false })
  const schemas = document.components["schemas"] ?? {}
  ajv.addSchema({ $id: COMPONENTS_ID, $defs: absoluteRefs(schemas) })
  ajv.addSchema({ $id: DECODED_COMPONENTS_ID, $defs: absoluteRefs(decodedJson(schemas), DECODED_COMPONENTS_ID) })
  const compiled = new Map<Json, ValidateFunction>()
  const compiledDecoded = new Map<Json, ValidateFunction>()
  const validatorOf = (schema: Json, decoded: boolean) => {
    const cache = decoded ? compiledDecoded : compiled
    let validate = cache.get(schema)
    if (validate === undefined) {
      const ready = decoded ? absoluteRefs(decodedJson(schema), DECODED_COMPONENTS_ID) : absoluteRefs(schema)
      cache.set(schema, validate = ajv.compile(ready as Json))
    }
    return validate
  }
  /** A `#/components/<kind>/<name>` reference's target; anything else as it is. */
  const resolved = (node: Json): Json => {
    const target = typeof node["$ref"] === "string" ? /^#\/components\/(\w+)\/(\w+)$/.exec(node["$ref"]) : null
    return target === null ? node : ((document.components[target[1]!] as Record<string, Json> | undefined)?.[target[2]!] ?? node)
  }
  const templates = Object.keys(document.paths).map((template) => ({ template, matches: templateMatcher(template) }))

  const check = (method: string, path: string, answer: Answer): ReadonlyArray<string> => {
    const bare = path.split("?")[0]!
    const template = templates.find(({ matches }) => matches.test(bare))?.template
    if (template === undefined) return [`${method} ${bare}: no such path in the document`]
    const operation = document.paths[template]![method.toLowerCase()]
    if (operation === undefined) return [`${method} ${template}: no such operation in the document`]
    const where = `${method} ${template} ${answer.status}`
    seen.add(where)
    const documented = operation.responses[String(answer.status)]
    if (documented === undefined) return [`${where}: undocumented status (body ${JSON.stringify(answer.body)})`]
    const problems: Array<string> = []
    for (const [name, header] of Object.entries(documented.headers ?? {})) {
      if (resolved(header)["required"] === true && !answer.headers.has(name)) problems.push(`${where}: header ${name} missing`)
    }
    const type = mediaType(answer.headers.get("content-type"))
    const content = documented.content
    if (content === undefined) {
      if (answer.body !== undefined && answer.body !== "") problems.push(`${where}: a body where the document has none`)
      return problems
    }
    const media = content[type]
    if (media === undefined) return [...problems, `${where}: content type ${type} is not one of ${Object.keys(content).join(", ")}`]
    const refusal = (value: unknown, decoded: boolean) => {
      const validator = validatorOf(media.schema, decoded)
      return validator(value) ? undefined : `${where}: ${ajv.errorsText(validator.errors)} in ${JSON.stringify(value).slice(0, 500)}`
    }
    if (type !== "text/event-stream" || media.schema["type"] === "string") {
      const refused = refusal(answer.body, false)
      return refused === undefined ? problems : [...problems, refused]
    }
    // A schema of one event (Effect's StreamSse): each frame as `{event, id?, data}`, its data as the JSON value its text
    // encodes (a `contentSchema`), or else as the text itself.
    for (const event of sseFrames(typeof answer.body === "string" ? answer.body : "")) {
      let asJson: string | undefined = `${where}: the data of ${JSON.stringify(event)} is not JSON`
      try {
        asJson = refusal({ ...event, data: JSON.parse(event.data) as unknown }, true)
      } catch {
        // Not JSON: only the text can match.
      }
      if (asJson !== undefined && refusal(event, true) !== undefined) problems.push(asJson)
    }
    return problems
  }

  const call = async (method: string, path: string, options: CallOptions = {}): Promise<Answer> => {
    const body = options.body === undefined ? undefined : typeof options.body === "string" ? options.body : JSON.stringify(options.body)
    const controller = new AbortController()
    const response = await fetch(`${serviceUrl}${path}`, {
      method,
      signal: controller.signal,
      headers: {
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
        ...options.headers
      },
      ...(body === undefined ? {} : { body })
    })
    const text = await readText(response, controller, options.readUntil)
    const json = mediaType(response.headers.get("content-type")).includes("json")
    const answer = { status: response.status, headers: response.headers, body: json && text !== "" ? JSON.parse(text) as unknown : text === "" ? undefined : text }
    const problems = check(method, path, answer)
    if (problems.length > 0) throw new Error(problems.join("\n"))
    return answer
  }

  const documented = () =>
    Object.entries(document.paths).flatMap(([template, operations]) =>
      Object.entries(operations).flatMap(([method, operation]) =>
        Object.keys(operation.responses).map((status) => `${method.toUpperCase()} ${template} ${status}`)))

  return { document, check, call, seen, documented, at: (url) => checkerOf(document, url, seen) }
}
