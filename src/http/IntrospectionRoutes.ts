/** Handler of POST / (spec §4.3). */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Introspection } from "../services/Introspection.ts"
import { CurrentPrincipal } from "./Authentication.ts"
import { databaseUnavailable } from "./Errors.ts"
import { MainApi } from "./MainApi.ts"
import { RequestContextResolver } from "./RequestContextResolver.ts"

export const IntrospectionHandlers = HttpApiBuilder.group(MainApi, "introspection", Effect.fn(function*(handlers) {
  const introspection = yield* Introspection
  const contextFor = yield* RequestContextResolver
  return handlers.handle("introspect", ({ request }) =>
    Effect.gen(function*() {
      const context = yield* contextFor(yield* CurrentPrincipal, request)
      return yield* introspection.describe(context)
    }).pipe(databaseUnavailable))
}))
