/** The four roles of a Plinth user (spec §2.2): a token's `role` claim and an invitation's role. */
import { Schema } from "effect"

export const AppRole = Schema.Literals(["owner", "admin", "staff", "member"])
export type AppRole = typeof AppRole.Type
