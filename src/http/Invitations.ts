/** Mailing an invitation link, as `POST /admin/invite` and `POST /admin/users/:id/resend-invite` both do. */
import { Effect, Option } from "effect"
import type { Mailer } from "../services/Mailer.ts"
import { BadGateway } from "./Errors.ts"
import { CurrentTenant } from "./TenantSelection.ts"

/**
 * Mails the invitation link of `token` to `to`. The link was stored before, so a mail that fails
 * loses nothing: the 502 says `failure`, what the caller can do next.
 */
export const mailInvitation = (mailer: Mailer["Service"], to: string, token: string, failure: string) =>
  Effect.flatMap(CurrentTenant, (tenant) =>
    mailer.sendMagicLink({ to, token, kind: "invite", tenant: Option.getOrUndefined(tenant) }).pipe(
      Effect.mapError(() => new BadGateway({ error: failure }))
    ))
