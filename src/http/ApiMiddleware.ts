/**
 * The middleware the API definitions declare (what they provide and how they fail), apart from
 * their implementations (Authentication.ts, Validation.ts), so that a client built from the
 * definitions pulls in nothing of the server.
 */
import { Context } from "effect"
import { HttpApiMiddleware, HttpApiSecurity } from "effect/http-api"
import type { Principal } from "../services/AccessTokens.ts"
import { BadRequest, Forbidden, Unauthorized } from "./Errors.ts"

export class CurrentPrincipal extends Context.Service<CurrentPrincipal, Principal>()("plinth/CurrentPrincipal") {}

export class Authentication extends HttpApiMiddleware.Service<Authentication, { provides: CurrentPrincipal }>()(
  "plinth/Authentication",
  { security: { bearer: HttpApiSecurity.bearer }, error: [Unauthorized, Forbidden] }
) {}

// A class, not a plain struct: a struct would match (and answer as 400) any undeclared error
// that happens to have an `error` string.
export class ValidationErrors extends HttpApiMiddleware.Service<ValidationErrors>()("plinth/ValidationErrors", {
  error: BadRequest
}) {}
