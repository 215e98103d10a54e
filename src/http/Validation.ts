/**
 * Request-decoding failures as `400 { "error": "<what is wrong>" }`, never the framework's empty
 * 400: those of HttpApi endpoints, and the JSON bodies of the plain routes, answered alike.
 */
import { NodeHttpServerRequest } from "@effect/platform-node"
import { ByteSize, Effect, Schema, SchemaIssue } from "effect"
import { type HttpServerError, type HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiMiddleware } from "effect/http-api"
import { IncomingMessage } from "node:http"
import { BadRequest, PayloadTooLarge, UNSUPPORTED_MEDIA_TYPE, UnsupportedMediaType } from "./Errors.ts"
import { ValidationErrors } from "./ApiMiddleware.ts"
import { MAX_BODY_SIZE } from "./HttpServerLive.ts"

export { ValidationErrors } from "./ApiMiddleware.ts"
export { isShallowJson, MAX_JSON_DEPTH } from "./JsonDepth.ts"

const formatIssues = SchemaIssue.makeFormatterStandardSchemaV1()

/** `password: Expected a value with a length between 8 and 128; role: ...` */
export const issuesLine = (error: Schema.SchemaError): string =>
  formatIssues(error.issue).issues
    .map((issue) => `${(issue.path ?? []).join(".") || "body"}: ${issue.message}`)
    .join("; ")


const kindLabel = { Params: "path", Headers: "headers", Query: "query", Payload: "body", Body: "body", ResponseHeaders: "headers" } as const

export const ValidationErrorsLive = HttpApiMiddleware.layerSchemaErrorTransform(ValidationErrors, (error) =>
  Effect.succeed(
    error.kind === "Body" || error.kind === "ResponseHeaders"
      // Our own response failed its schema: a bug, not the caller's fault.
      ? HttpServerResponse.jsonUnsafe({ error: "internal server error" }, { status: 500 })
      : HttpServerResponse.jsonUnsafe({ error: `invalid ${kindLabel[error.kind]}: ${issuesLine(error.cause)}` }, { status: 400 })
  ))

/**
 * The JSON body of a plain route, as HttpApi decodes an endpoint's payload (so both kinds of
 * route answer alike): a media type other than JSON is a 415 (none counts as JSON), then JSON
 * that does not parse or does not match `schema` is a 400 naming what is wrong, and an empty body
 * is decoded as `undefined`. A body over the limit fails as the platform's 413.
 */
export const jsonBody = <S extends Schema.Top>(schema: S) => {
  const decode = Schema.decodeUnknownEffect(schema)
  const invalid = (error: Schema.SchemaError) => new BadRequest({ error: `invalid body: ${issuesLine(error)}` })
  return (
    request: HttpServerRequest.HttpServerRequest
  ): Effect.Effect<S["Type"], BadRequest | UnsupportedMediaType | PayloadTooLarge | HttpServerError.HttpServerError, S["DecodingServices"]> => {
    const mediaType = mediaTypeOf(request.headers["content-type"] ?? "application/json")
    if (mediaType !== "application/json") return Effect.fail(new UnsupportedMediaType({ error: UNSUPPORTED_MEDIA_TYPE }))
    return Effect.flatMap(bodyText(request), (text) => {
      let json: unknown
      try {
        json = text === "" ? undefined : JSON.parse(text)
      } catch {
        return Effect.fail(new BadRequest({ error: "invalid body: body: Expected a valid JSON body" }))
      }
      return Effect.mapError(decode(json), invalid)
    })
  }
}

const mediaTypeOf = (contentType: string) => contentType.split(";")[0]!.trim().toLowerCase()

const MAX_BODY_BYTES = ByteSize.toNumberUnsafe(MAX_BODY_SIZE)
const utf8 = new TextDecoder()

/**
 * The body as text (decoded as the platform decodes it), read straight from Node's request: the
 * platform's reader, with its end-of-stream tracking, costs more a request, and every data-plane
 * request has a body. A request waiting for `100 Continue` is left to the
 * platform, which sends it. Past MAX_BODY_SIZE reading stops with 413; the platform then closes
 * the connection after the answer, as after its own reader's 413.
 */
const bodyText = (request: HttpServerRequest.HttpServerRequest): Effect.Effect<string, PayloadTooLarge | BadRequest | HttpServerError.HttpServerError> => {
  const source = NodeHttpServerRequest.toIncomingMessage(request)
  if (!(source instanceof IncomingMessage) || source.headers.expect !== undefined) return request.text
  if (Number(source.headers["content-length"]) > MAX_BODY_BYTES) return Effect.fail(new PayloadTooLarge())
  return Effect.callback((resume) => {
    const chunks: Array<Buffer> = []
    let bytes = 0
    const stop = () => {
      source.off("data", onData)
      source.off("end", onEnd)
      source.off("error", onBroken)
      source.off("close", onBroken)
    }
    const finish = (outcome: Effect.Effect<string, PayloadTooLarge | BadRequest>) => {
      stop()
      resume(outcome)
    }
    const onData = (chunk: Buffer) => {
      bytes += chunk.length
      if (bytes <= MAX_BODY_BYTES) return chunks.push(chunk)
      source.pause()
      finish(Effect.fail(new PayloadTooLarge()))
    }
    const onEnd = () => finish(Effect.succeed(utf8.decode(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks))))
    // The client went away mid-body: nobody reads the answer, but the request must still end.
    const onBroken = () => finish(Effect.fail(new BadRequest({ error: "the request body could not be read" })))
    source.on("data", onData)
    source.on("end", onEnd)
    source.on("error", onBroken)
    source.on("close", onBroken)
    return Effect.sync(stop)
  })
}
