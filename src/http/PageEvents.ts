/**
 * The events of GET /events (spec §6.1) as Server-Sent Events: each schema decodes an SSE frame's
 * `{event, data}` (data as the JSON text on the wire) into `{event, data}` with data parsed. The
 * route writes its frames from these types, /openapi.json documents them, and the client decodes
 * with them.
 */
import { Schema } from "effect"

/** A page was created, changed or deleted: fetch it again from `sys.pages_v`. */
export const PageChange = Schema.Struct({
  schema: Schema.String.annotate({ description: "the page's app schema" }),
  slug: Schema.String
}).annotate({ identifier: "PageChange", description: "a page was created, changed or deleted: fetch it again from sys.pages_v" })

export const PageChangeEvent = Schema.Struct({
  event: Schema.Literal("page_change"),
  data: Schema.fromJsonString(PageChange)
})

/** The server's connection to the database was lost and is back: refetch what is shown. */
export const ResyncEvent = Schema.Struct({
  event: Schema.Literal("resync"),
  data: Schema.fromJsonString(Schema.Struct({}))
}).annotate({ description: "events may have been missed (the database connection was lost and is back): refetch what is shown" })

export const PageEvent = Schema.Union([PageChangeEvent, ResyncEvent]).annotate({ identifier: "PageEvent" })
export type PageEvent = typeof PageEvent.Type

/** What the 200 of GET /events says besides the events: the comment lines. */
export const PAGE_EVENTS_DESCRIPTION = "Server-Sent Events until the connection closes: the comment `: connected` once the stream is " +
  "subscribed (nothing after it is missed), `: heartbeat` every EVENTS_HEARTBEAT, and the events `page_change` " +
  "(data: PageChange) and `resync` (data: {}). A client more than 32 KiB behind is disconnected."
