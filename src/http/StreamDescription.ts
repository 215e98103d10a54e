/**
 * An event stream's 200 in /openapi.json: Effect documents the events' schema, but says nothing of
 * the frames around them and adds its own `x-effect-stream` failure event, which Plinth never sends.
 */
import { OpenApi } from "effect/http-api"

const EVENT_STREAM = "text/event-stream"

export const describeStream = (description: string) =>
  OpenApi.annotations({
    transform: (operation) => {
      const ok = operation["responses"]?.["200"]
      const media = ok?.content?.[EVENT_STREAM]
      if (media === undefined) return operation
      const { "x-effect-stream": _effectOnly, ...documented } = media
      return { ...operation, responses: { ...operation["responses"], 200: { ...ok, description, content: { ...ok.content, [EVENT_STREAM]: documented } } } }
    }
  })
