/** Mailing an invitation link, as `POST /admin/invite` and `POST /admin/users/:id/resend-invite` both do. */
import { Effect } from "effect"
import type { Mailer } from "../services/Mailer.ts"
import { BadGateway } from "./Errors.ts"

/**
 * Mails the invitation link of `token` to `to`. The link was stored before, so a mail that fails
 * loses nothing: the 502 says `failure`, what the caller can do next.
 */
export const mailInvitation = (mailer: Mailer["Service"], to: string, token: string, failure: string) =>
  mailer.sendMagicLink({ to, token, kind: "invite" }).pipe(Effect.mapError(() => new BadGateway({ error: failure })))
