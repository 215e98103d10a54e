/**
 * The event streams' 200s in /openapi.json: Effect documents the events' schema (HttpApiSchema.StreamSse),
 * but says nothing of the frames around them and adds its own `x-effect-stream` failure event,
 * which Plinth never sends. Applied to the whole document, so that it composes with what the
 * endpoints' own annotations do.
 */
import { OpenApi } from "effect/http-api"
import { CHAT_EVENTS_DESCRIPTION } from "./ChatEvents.ts"
import { PAGE_EVENTS_DESCRIPTION } from "./PageEvents.ts"

const EVENT_STREAM = "text/event-stream"

/** What each stream's 200 says, by the component of its events. */
const DESCRIPTIONS: Record<string, string> = {
  "#/components/schemas/PageEvent": PAGE_EVENTS_DESCRIPTION,
  "#/components/schemas/ChatEvent": CHAT_EVENTS_DESCRIPTION
}

// The document is Effect's generated JSON: plain objects, read loosely.
type Json = Record<string, any>

const describe = (operation: Json): Json => {
  const ok: Json | undefined = operation["responses"]?.["200"]
  const media: Json | undefined = ok?.["content"]?.[EVENT_STREAM]
  if (ok === undefined || media === undefined) return operation
  const { "x-effect-stream": _effectOnly, ...documented } = media
  const description = DESCRIPTIONS[documented["schema"]?.["$ref"]] ?? ok["description"]
  return { ...operation, responses: { ...operation["responses"], 200: { ...ok, description, content: { ...ok["content"], [EVENT_STREAM]: documented } } } }
}

export const describeEventStreams = OpenApi.annotations({
  transform: (spec) => ({
    ...spec,
    paths: Object.fromEntries(Object.entries(spec["paths"] ?? {}).map(([path, item]) => [
      path,
      Object.fromEntries(Object.entries(item as Json).map(([method, operation]) => [method, describe(operation as Json)]))
    ]))
  })
})
