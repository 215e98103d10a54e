/**
 * Which implementation of each outside service runs, chosen from the configuration: the mail
 * provider or the console, the bot check or none, the AI model or an error saying none is set.
 */
import { Effect, Layer, Option } from "effect"
import { FetchHttpClient, HttpClient } from "effect/http"
import { Challenge, type ClaimStore, memoryClaims } from "../services/Challenge.ts"
import { Mailer, PROVIDER_VARIABLES, providerSettings } from "../services/Mailer.ts"
import { Model } from "../services/Model.ts"
import { PlinthConfig } from "../services/PlinthConfig.ts"

/** The provider when it is configured completely; else the console (development) or a warning (production). */
export const MailerLive: Layer.Layer<Mailer, never, PlinthConfig> = Layer.effect(Mailer, Effect.gen(function*() {
  const config = yield* PlinthConfig
  const provider = providerSettings(config)
  if (provider._tag === "Configured") return Mailer.provider(yield* HttpClient.HttpClient, provider, config.appUrl)
  if (provider.missing.length < PROVIDER_VARIABLES.length) {
    // A half-finished setup is most likely a typo in a deployment; say so once rather than on every mail.
    yield* Effect.logWarning(`mail provider partially configured: ${provider.missing.join(", ")} not set; magic links are not emailed`)
  }
  return config.isProduction ? Mailer.dropping : Mailer.console(config.appUrl)
})).pipe(Layer.provide(FetchHttpClient.layer))

/** The bot check with CHALLENGE_SECRET (claims in `claims`), else none. */
export const challengeLayer = (claims: ClaimStore): Layer.Layer<Challenge, never, PlinthConfig> =>
  Layer.effect(Challenge, Effect.gen(function*() {
    const config = yield* PlinthConfig
    if (Option.isNone(config.challengeSecret)) {
      if (config.isProduction) yield* Effect.logWarning("CHALLENGE_SECRET not set: the bot check is skipped")
      return Challenge.skipped
    }
    return Challenge.siteverify({
      client: yield* HttpClient.HttpClient,
      secret: config.challengeSecret.value,
      verifyUrl: config.challengeVerifyUrl,
      failClosed: config.isProduction,
      claims
    })
  })).pipe(Layer.provide(FetchHttpClient.layer))

/** The bot check with its claims remembered by this process only. */
export const ChallengeInMemory: Layer.Layer<Challenge, never, PlinthConfig> = Layer.suspend(() => challengeLayer(memoryClaims()))

/** The Anthropic model with ANTHROPIC_API_KEY, else one that answers that none is configured. */
export const ModelLive: Layer.Layer<Model, never, PlinthConfig> = Layer.effect(Model, Effect.gen(function*() {
  const config = yield* PlinthConfig
  return Option.match(config.anthropicApiKey, {
    onNone: () => Model.unconfigured,
    onSome: (apiKey) => Model.anthropic({ apiKey, baseUrl: config.anthropicBaseUrl, model: config.anthropicModel })
  })
}))
