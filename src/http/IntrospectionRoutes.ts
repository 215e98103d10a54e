/** Handler of POST / (spec §4.3). */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Introspection } from "../services/Introspection.ts"
import { CurrentPrincipal } from "./Authentication.ts"
import { databaseUnavailable } from "./Errors.ts"
import type { IntrospectionBody } from "./IntrospectionApi.ts"
import { ServedApi } from "./MainApi.ts"
import { resolveRequestContext } from "./RequestContextResolver.ts"

export const IntrospectionHandlers = HttpApiBuilder.group(ServedApi, "introspection", (handlers) =>
  handlers.handle("introspect", ({ request }) =>
    // The tenant's introspection (and its cache), so it is looked up per request. Combinators, not
    // a generator written inline per request (docs/performance-notes.md says why).
    Effect.flatMap(Effect.service(CurrentPrincipal), (principal) => resolveRequestContext(principal, request)).pipe(
      Effect.flatMap((context) => Effect.flatMap(Effect.service(Introspection), (introspection) => introspection.describe(context))),
      // The database's JSON, whose shapes IntrospectionBody spells out (and checks as it encodes the answer).
      Effect.map((result) => result as typeof IntrospectionBody.Type),
      databaseUnavailable
    )))
