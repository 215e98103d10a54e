/**
 * Where the JWT secret comes from: `JWT_SECRET`, or (development only; production refuses to
 * start without it) the one generated once in the data directory, so tokens survive restarts.
 */
import { Effect, Layer, Option, Redacted } from "effect"
import * as path from "node:path"
import { AccessTokens, makeAccessTokens } from "../services/AccessTokens.ts"
import { PlinthConfig } from "../services/PlinthConfig.ts"
import { loadLocalSecrets } from "./LocalSecrets.ts"

export const AccessTokensLive = Layer.effect(AccessTokens, Effect.gen(function*() {
  const config = yield* PlinthConfig
  const secret = Option.isSome(config.jwtSecret)
    ? config.jwtSecret.value
    : Redacted.make((yield* loadLocalSecrets(path.resolve(config.dataDir))).jwt)
  return makeAccessTokens({ secret, ttl: config.jwtTtl, multiTenant: config.multiTenant })
}))
