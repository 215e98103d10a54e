/** Handler of GET /admin/audit: the caller must be an owner or an admin, as the database checks too. */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { listAuditEvents } from "../services/AuditTrail.ts"
import { requireRole } from "./Authentication.ts"
import { databaseUnavailable, Forbidden } from "./Errors.ts"
import { ServedApi } from "./MainApi.ts"
import { resolveRequestContext } from "./RequestContextResolver.ts"

export const AuditHandlers = HttpApiBuilder.group(ServedApi, "audit", (handlers) =>
  handlers.handle("listAuditEvents", ({ query, request }) =>
    Effect.gen(function*() {
      const principal = yield* requireRole(["owner", "admin"])
      const context = yield* resolveRequestContext(principal, request)
      const events = yield* listAuditEvents(context, query.since, query.limit).pipe(
        Effect.catchTag("AuditRefused", (refused) => Effect.fail(new Forbidden({ error: refused.message })))
      )
      return { events }
    }).pipe(databaseUnavailable)))
