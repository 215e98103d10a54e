/** Handler of POST / (spec §4.3). */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Introspection } from "../services/Introspection.ts"
import { CurrentPrincipal } from "./Authentication.ts"
import { databaseUnavailable } from "./Errors.ts"
import { ServedApi } from "./MainApi.ts"
import { resolveRequestContext } from "./RequestContextResolver.ts"

export const IntrospectionHandlers = HttpApiBuilder.group(ServedApi, "introspection", (handlers) =>
  handlers.handle("introspect", ({ request }) =>
    Effect.gen(function*() {
      const context = yield* resolveRequestContext(yield* CurrentPrincipal, request)
      // The tenant's introspection (and its cache), so it is looked up per request.
      return yield* (yield* Introspection).describe(context)
    }).pipe(databaseUnavailable)))
