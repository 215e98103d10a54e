/**
 * Handlers of spec §4.2: magic links, verification, first password, invitations, the
 * development-only password login, and email changes confirmed from the new address. Every status
 * the spec lists is decided here, from the typed failures of the services below.
 */
import { Effect, Option } from "effect"
import type { HttpServerRequest } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { emailChangeKeys, loginKeys, magicLinkKeys, type RateLimitKey, RateLimiter } from "../actors/RateLimiter.ts"
import { AccessTokens } from "../services/AccessTokens.ts"
import { Challenge } from "../services/Challenge.ts"
import * as Identity from "../services/Identity.ts"
import { Mailer } from "../services/Mailer.ts"
import { PlinthConfig } from "../services/PlinthConfig.ts"
import { makeProxyMatcher } from "../services/TrustedProxies.ts"
import { CurrentPrincipal, requireRole } from "./Authentication.ts"
import {
  BadRequest,
  Conflict,
  databaseUnavailable,
  Forbidden,
  NotFound,
  TooManyRequests,
  Unauthorized
} from "./Errors.ts"
import { mailInvitation } from "./Invitations.ts"
import { ServedApi } from "./MainApi.ts"
import { CurrentTenant } from "./TenantSelection.ts"

/**
 * The socket's address, or the client address the proxy's header names when the socket's peer is a
 * trusted proxy: from anyone else the header is the client's own choice of rate-limit bucket. In a
 * list (`x-forwarded-for`), the last entry that is not itself a trusted proxy: a proxy appends what
 * it saw, and the entries before it are whatever the client sent.
 */
const clientAddressOf = (header: string, isTrustedProxy: (peer: string | undefined) => boolean) => {
  const name = header.toLowerCase()
  return (request: HttpServerRequest.HttpServerRequest): string => {
    const peer = Option.getOrUndefined(request.remoteAddress)
    const value = request.headers[name]
    if (value !== undefined && isTrustedProxy(peer)) {
      // Read from the end, however long the client made the front (the server bounds headers).
      const hops = value.split(",").map(withoutPort)
      let index = hops.length - 1
      while (index > 0 && isTrustedProxy(hops[index])) index--
      const forwarded = hops[index]!
      if (forwarded !== "" && forwarded.length <= 64) return forwarded
    }
    return peer ?? "unknown"
  }
}

/** `1.2.3.4:5678` → `1.2.3.4`, `[::1]:80` → `::1`: a port some balancers append is no part of the client's address. */
const withoutPort = (hop: string): string => {
  const trimmed = hop.trim()
  const v4 = /^(\d{1,3}(?:\.\d{1,3}){3}):\d+$/.exec(trimmed)
  if (v4 !== null) return v4[1]!
  const v6 = /^\[([^\]]+)\](?::\d+)?$/.exec(trimmed)
  return v6 !== null ? v6[1]! : trimmed
}

const signIn = Effect.fn("AuthRoutes.signIn")(function*(user: Identity.SignedInUser) {
  const tokens = yield* AccessTokens
  const tenant = yield* CurrentTenant
  const token = yield* tokens.issue({
    userId: user.id,
    role: user.role,
    email: user.email,
    ...(Option.isSome(tenant) ? { tenant: tenant.value } : {})
  })
  return { token, user }
})

/** Counts one request against `keys`, within the current tenant's buckets (one mailbox in two tenants is two users). */
const limit = (limiter: RateLimiter["Service"], keys: ReadonlyArray<RateLimitKey>, error: string) =>
  Effect.flatMap(CurrentTenant, (current) => {
    const tenant = Option.getOrElse(current, () => "")
    return limiter.check(keys.map(({ key, rule }) => ({ key: `${tenant}/${key}`, rule }))).pipe(
      Effect.mapError((limited) => new TooManyRequests({ error, retryAfterSeconds: limited.retryAfterSeconds }))
    )
  })

export const AuthHandlers = HttpApiBuilder.group(ServedApi, "auth", Effect.fn(function*(handlers) {
  const config = yield* PlinthConfig
  const limiter = yield* RateLimiter
  const challenge = yield* Challenge
  const mailer = yield* Mailer
  const clientAddress = clientAddressOf(config.clientIpHeader, makeProxyMatcher(config.trustedProxies))

  const checkChallenge = (token: string | undefined, address: string) =>
    challenge.verify(token, address).pipe(Effect.mapError(() => new Forbidden({ error: "challenge verification failed" })))

  return handlers
    .handle("requestMagicLink", ({ payload, request }) =>
      Effect.gen(function*() {
        const address = clientAddress(request)
        // Spec §8: rate limits first, the challenge after.
        yield* limit(limiter, magicLinkKeys(payload.email, address), "too many sign-in requests; try again later")
        yield* checkChallenge(payload.challenge_token, address)
        const token = yield* Identity.createMagicLink(payload.email)
        // The mail goes out after the response, so its duration tells nobody whether the address is known.
        if (Option.isSome(token)) {
          const tenant = Option.getOrUndefined(yield* CurrentTenant)
          yield* Effect.forkDetach(
            mailer.sendMagicLink({ to: payload.email, token: token.value, kind: "sign-in", tenant }).pipe(
              Effect.catchTag("MailError", (error) => Effect.logWarning(`magic link not delivered: ${error.message}`))
            )
          )
        }
        return { sent: true as const }
      }).pipe(databaseUnavailable))
    .handle("verifyMagicLink", ({ payload }) =>
      Effect.gen(function*() {
        const user = yield* Identity.verifyMagicLink(payload.token)
        if (Option.isNone(user)) return yield* new Unauthorized({ error: "invalid or expired token" })
        return yield* signIn(user.value)
      }).pipe(databaseUnavailable))
    .handle("verifyEmailChange", ({ payload }) =>
      Effect.gen(function*() {
        const user = yield* Identity.confirmEmailChange(payload.token).pipe(
          Effect.catchTag("DuplicateEmail", () => Effect.fail(new Conflict({ error: "a user with this email already exists" })))
        )
        if (Option.isNone(user)) return yield* new Unauthorized({ error: "invalid or expired token" })
        return yield* signIn(user.value)
      }).pipe(databaseUnavailable))
    .handle("login", ({ payload, request }) =>
      Effect.gen(function*() {
        if (config.isProduction) return yield* new NotFound({ error: "not found" })
        const address = clientAddress(request)
        yield* limit(limiter, loginKeys(payload.email, address), "too many login attempts; try again later")
        yield* checkChallenge(payload.challenge_token, address)
        const user = yield* Identity.login(payload.email, payload.password)
        if (Option.isNone(user)) return yield* new Unauthorized({ error: "invalid email or password" })
        return yield* signIn(user.value)
      }).pipe(databaseUnavailable))
}))

export const AccountHandlers = HttpApiBuilder.group(ServedApi, "account", Effect.fn(function*(handlers) {
  const tokens = yield* AccessTokens
  const mailer = yield* Mailer
  const limiter = yield* RateLimiter

  return handlers
    .handle("setPassword", ({ payload }) =>
      Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        yield* Identity.setInitialPassword(principal, payload.password).pipe(
          Effect.catchTags({
            PasswordAlreadySet: () => Effect.fail(new Conflict({ error: "password already set" })),
            InvalidPassword: (error) => Effect.fail(new BadRequest({ error: error.message })),
            UnknownUser: () => Effect.fail(new Unauthorized({ error: "unknown user" }))
          })
        )
        return { ok: true as const, token: yield* tokens.issue(principal) }
      }).pipe(databaseUnavailable))
    .handle("requestEmailChange", ({ payload }) =>
      Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        yield* limit(limiter, emailChangeKeys(principal.userId, payload.email), "too many email change requests; try again later")
        const token = yield* Identity.requestEmailChange(principal, payload.email).pipe(
          Effect.catchTags({
            InvalidEmailChange: (error) => Effect.fail(new BadRequest({ error: error.message })),
            UnknownUser: () => Effect.fail(new Unauthorized({ error: "unknown user" }))
          })
        )
        // After the response, as for magic links: its timing tells nobody whether the address has an account.
        if (Option.isSome(token)) {
          const tenant = Option.getOrUndefined(yield* CurrentTenant)
          yield* Effect.forkDetach(
            mailer.sendMagicLink({ to: payload.email, token: token.value, kind: "email-change", tenant }).pipe(
              Effect.catchTag("MailError", (error) => Effect.logWarning(`email change link not delivered: ${error.message}`))
            )
          )
        }
        return { sent: true as const }
      }).pipe(databaseUnavailable))
    .handle("invite", ({ payload }) =>
      Effect.gen(function*() {
        const principal = yield* requireRole(["owner", "admin"])
        const token = yield* Identity.inviteUser(principal, payload.email, payload.role).pipe(
          Effect.catchTags({
            InviteRefused: (error) => Effect.fail(new Forbidden({ error: error.message })),
            InvalidInvite: (error) => Effect.fail(new BadRequest({ error: error.message })),
            DuplicateEmail: () => Effect.fail(new Conflict({ error: "a user with this email already exists" }))
          })
        )
        // The user exists now whatever happens to the mail: they can still ask for a sign-in link.
        yield* mailInvitation(mailer, payload.email, token, "the user was invited, but the invitation email could not be sent; they can request a sign-in link")
        return { ok: true as const }
      }).pipe(databaseUnavailable))
}))
