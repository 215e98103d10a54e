/**
 * Secrets that a development install generates once and keeps in its data directory (mode 0600):
 * the embedded superuser's and login roles' passwords, and the JWT secret when none is configured.
 */
import { Effect, Schema } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"

export const LocalSecrets = Schema.Struct({
  postgres: Schema.String,
  authenticator: Schema.String,
  chat_authenticator: Schema.String,
  jwt: Schema.String
})
export type LocalSecrets = typeof LocalSecrets.Type

export class LocalSecretsError extends Schema.TaggedError<LocalSecretsError>()("LocalSecretsError", {
  message: Schema.String
}) {}

const SECRETS_FILE = "secrets.json"
const generate = (): LocalSecrets => ({
  postgres: randomBytes(24).toString("hex"),
  authenticator: randomBytes(24).toString("hex"),
  chat_authenticator: randomBytes(24).toString("hex"),
  jwt: randomBytes(32).toString("base64url")
})

const decode = Schema.decodeUnknownEffect(Schema.fromJsonString(LocalSecrets))

const describe = (cause: unknown): string =>
  cause instanceof Error && "code" in cause ? String(cause.code) : String(cause)

/** Reads the data directory's secrets, creating the directory and the file on first use. */
export const loadLocalSecrets = Effect.fn("LocalSecrets.load")(function*(dataDir: string) {
  const file = path.join(dataDir, SECRETS_FILE)
  yield* Effect.tryPromise({
    try: () => fs.mkdir(dataDir, { recursive: true, mode: 0o711 }),
    catch: (cause) => new LocalSecretsError({ message: `cannot create data directory ${dataDir}: ${describe(cause)}` })
  })
  const existing = yield* Effect.promise(() => fs.readFile(file, "utf8").then((text) => text, () => undefined))
  if (existing !== undefined) {
    return yield* decode(existing).pipe(
      Effect.mapError(() => new LocalSecretsError({ message: `${file} is not a valid secrets file; move it away to regenerate` }))
    )
  }
  const secrets = generate()
  yield* Effect.tryPromise({
    try: () => fs.writeFile(file, JSON.stringify(secrets, null, 2), { mode: 0o600, flag: "wx" }),
    catch: (cause) => new LocalSecretsError({ message: `cannot write ${file}: ${describe(cause)}` })
  })
  return secrets
})
