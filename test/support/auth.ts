/**
 * The main service as the auth tests need it: its own database, a fake mail API that records
 * every link sent, and small helpers to invite, sign in and call endpoints.
 */
import { decodeJwt } from "jose"
import { createTestDatabase, query, type TestDatabase } from "./database.ts"
import { type FakeMailApi, startFakeMailApi } from "./FakeMailApi.ts"
import { type RunningService, startService } from "./services.ts"

export const APP_URL = "http://app.test"

export interface AuthStack {
  readonly db: TestDatabase
  readonly main: RunningService
  readonly mail: FakeMailApi
  /** Environment the service was started with (for starting a sibling with changes). */
  readonly env: Record<string, string>
  readonly close: () => Promise<void>
}

export const mailEnv = (mail: FakeMailApi): Record<string, string> => ({
  APP_URL,
  MAIL_API_URL: mail.url,
  MAIL_API_KEY: "key-test",
  MAIL_DOMAIN: "mg.plinth.test",
  MAIL_FROM: "Plinth <no-reply@plinth.test>"
})

export const startAuthStack = async (env: Record<string, string> = {}): Promise<AuthStack> => {
  const db = await createTestDatabase()
  const mail = await startFakeMailApi()
  const fullEnv = { ...mailEnv(mail), ...env }
  const main = await startService("main", db.mainUrl, fullEnv)
  return {
    db,
    main,
    mail,
    env: fullEnv,
    close: async () => {
      await main.close()
      await mail.close()
      await db.drop()
    }
  }
}

export interface JsonResponse<T = unknown> {
  readonly status: number
  readonly headers: Headers
  readonly body: T
}

/** POSTs JSON (with a bearer token when given) and reads the JSON answer. */
export const post = async <T = Record<string, unknown>>(
  base: string,
  path: string,
  body: unknown,
  options: { readonly token?: string; readonly headers?: Record<string, string> } = {}
): Promise<JsonResponse<T>> => {
  const response = await fetch(`${base}${path}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
      ...options.headers
    },
    body: typeof body === "string" ? body : JSON.stringify(body)
  })
  const text = await response.text()
  return { status: response.status, headers: response.headers, body: (text === "" ? undefined : JSON.parse(text)) as T }
}

/** The rows of `statement` run through POST /sql as `who` in the app `schema`; any answer but 200 throws. */
export const sqlRows = async (
  base: string,
  who: SignIn,
  schema: string,
  statement: string,
  params: ReadonlyArray<unknown> = []
): Promise<Array<Record<string, unknown>>> => {
  const answer = await post<{ rows: Array<Record<string, unknown>> }>(base, "/sql", { sql: statement, params }, {
    token: who.token,
    headers: { "x-app-schema": schema }
  })
  if (answer.status !== 200) throw new Error(`POST /sql answered ${answer.status}: ${JSON.stringify(answer.body)}`)
  return answer.body.rows
}

export interface SignIn {
  readonly token: string
  readonly user: { readonly id: string; readonly email: string; readonly display_name: string; readonly role: string; readonly needs_password: boolean }
}

/** What a database administrator does for the first owner: `sys.invite_user` with no app role. */
export const inviteAsDatabaseAdmin = async (db: TestDatabase, email: string, role: string): Promise<string> => {
  const rows = await query(db.adminUrl, (sql) => sql<{ token: string }>`SELECT sys.invite_user(${email}, ${role}) AS token`)
  return rows[0]!.token
}

/** Exchanges a magic-link token for a JWT, failing the test if that does not work. */
export const verify = async (base: string, token: string): Promise<SignIn> => {
  const response = await post<SignIn>(base, "/auth/magic-link/verify", { token })
  if (response.status !== 200) throw new Error(`verify failed: ${response.status} ${JSON.stringify(response.body)}`)
  return response.body
}

/** A signed-in user of `role`, invited by a database administrator. */
export const signedIn = async (stack: AuthStack, email: string, role: string): Promise<SignIn> =>
  verify(stack.main.url, await inviteAsDatabaseAdmin(stack.db, email, role))

/** The token of the newest link mailed to `to`, waiting a little for mails sent after the response. */
export const mailedToken = async (mail: FakeMailApi, to: string, timeoutMs = 5_000): Promise<string> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const message = mail.messages.filter((m) => m.to === to).at(-1)
    const token = message?.text.match(/token=([0-9a-f]+)/)?.[1]
    if (token !== undefined) return token
    if (Date.now() > deadline) throw new Error(`no magic link mailed to ${to}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

export const claimsOf = (jwt: string) => decodeJwt(jwt)
