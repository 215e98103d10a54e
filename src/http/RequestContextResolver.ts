/**
 * The caller plus the app their `X-App-Schema` names: everything RequestContext needs to set up
 * the request's transaction. Absent (or `public`): the public schema; malformed or unknown: 400.
 * The app registry is the request's tenant's, so it is looked up per request.
 */
import { Effect, Option } from "effect"
import type { HttpServerRequest } from "effect/http"
import type { Principal } from "../services/AccessTokens.ts"
import { AppRegistry } from "../services/AppRegistry.ts"
import { PlinthConfig } from "../services/PlinthConfig.ts"
import { currentRequestId, type RequestContext } from "../services/RequestContext.ts"
import { PLAIN_NAME } from "../services/SqlIdentifier.ts"
import { BadRequest } from "./Errors.ts"

// On every request: untraced, since a span nothing reads is a cost per call (docs/performance-notes.md).
export const resolveRequestContext = Effect.fnUntraced(
  function*(principal: Principal, request: HttpServerRequest.HttpServerRequest) {
    const config = yield* PlinthConfig
    const header = request.headers["x-app-schema"]
    const base: RequestContext = {
      role: principal.role,
      userId: principal.userId,
      statementTimeout: config.sqlTimeout,
      // For the audit events its statements append.
      requestId: yield* currentRequestId
    }
    if (header === undefined || header === "" || header === "public") return base
    if (!PLAIN_NAME.test(header)) return yield* new BadRequest({ error: "invalid X-App-Schema" })
    const app = yield* (yield* AppRegistry).resolve(header)
    if (Option.isNone(app)) return yield* new BadRequest({ error: `unknown app schema: ${header}` })
    return { ...base, app: app.value }
  }
)
