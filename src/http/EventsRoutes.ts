/**
 * GET /events (spec §6.1): page changes as Server-Sent Events. The JWT comes in the
 * Authorization header or, because browsers' EventSource cannot set headers, as `?token=`.
 * The stream opens with `: connected`, sends `: heartbeat` every EVENTS_HEARTBEAT (30 s), and
 * `event: page_change` / `event: resync` as the tenant's actor publishes them.
 */
import { Effect, Schedule, Stream } from "effect"
import { Sse } from "effect/encoding"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { type PageEvent, TenantActor } from "../actors/TenantActor.ts"
import { AccessTokens } from "../services/AccessTokens.ts"
import { PlinthConfig } from "../services/PlinthConfig.ts"
import { checkTenant } from "./Authentication.ts"
import { TooManyRequests, Unauthorized } from "./Errors.ts"

const encoder = new TextEncoder()
const encodeText = (text: string) => encoder.encode(text)

/**
 * One event goes to every stream of the tenant as the same object: its bytes are built once and
 * shared (with thousands of streams, encoding per stream is most of the work of a page change).
 */
const frames = new WeakMap<PageEvent, Uint8Array>()
const frame = (event: PageEvent): Uint8Array => {
  const known = frames.get(event)
  if (known !== undefined) return known
  const bytes = encoder.encode(
    event._tag === "PageChange"
      ? Sse.encoder.write({ _tag: "Event", event: "page_change", id: undefined, data: JSON.stringify({ schema: event.schema, slug: event.slug }) })
      : Sse.encoder.write({ _tag: "Event", event: "resync", id: undefined, data: "{}" })
  )
  frames.set(event, bytes)
  return bytes
}

const CONNECTED = encodeText(": connected\n\n")
const HEARTBEAT = encodeText(": heartbeat\n\n")

const bearerToken = (request: HttpServerRequest.HttpServerRequest): string => {
  const header = request.headers["authorization"]
  if (header !== undefined && header.toLowerCase().startsWith("bearer ")) return header.slice(7).trim()
  const query = new URL(request.url, "http://localhost").searchParams.get("token")
  return query ?? ""
}

export const EventsRoute = HttpRouter.add("GET", "/events", Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const tokens = yield* AccessTokens
  const tenant = yield* TenantActor
  const config = yield* PlinthConfig
  const principal = yield* tokens.verify(bearerToken(request)).pipe(
    Effect.mapError((error) => new Unauthorized({ error: error.reason }))
  )
  yield* checkTenant(principal)
  // Subscribe before answering: a client that has seen `: connected` misses nothing after it.
  const events = yield* tenant.subscribe(principal.userId).pipe(
    Effect.mapError((error) => new TooManyRequests({ error: `at most ${error.limit} event streams per user`, retryAfterSeconds: 30 }))
  )
  const body = Stream.succeed(CONNECTED).pipe(
    Stream.concat(Stream.merge(
      Stream.map(events, frame),
      Stream.fromSchedule(Schedule.spaced(config.eventsHeartbeat)).pipe(Stream.as(HEARTBEAT)),
      { haltStrategy: "left" }
    ))
  )
  return HttpServerResponse.stream(body, {
    contentType: "text/event-stream",
    headers: { "cache-control": "no-cache", "x-accel-buffering": "no" }
  })
}))
