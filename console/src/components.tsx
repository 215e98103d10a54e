/** Small pieces every screen uses. */
import type { ComponentChildren } from "preact"
import { useEffect } from "preact/hooks"

/** A message: `status` is announced politely, `error` at once (role alert). */
export const Message = (props: { readonly kind: "status" | "error"; readonly children: ComponentChildren }) => (
  <p role={props.kind === "error" ? "alert" : "status"} class={`message ${props.kind}`}>{props.children}</p>
)

/** The tab's title, for this screen. */
export const useTitle = (title: string) => {
  useEffect(() => {
    document.title = `${title} · Plinth Console`
  }, [title])
}

/** A time as the browser's locale writes it; `never` for none. */
export const formatTime = (iso: string | null, never = "Never"): string => {
  if (iso === null) return never
  const time = new Date(iso)
  return Number.isNaN(time.getTime()) ? iso : time.toLocaleString()
}

export const ROLE_LABELS: Readonly<Record<string, string>> = { owner: "Owner", admin: "Admin", staff: "Staff", member: "Member" }
export const roleLabel = (role: string): string => ROLE_LABELS[role] ?? role
