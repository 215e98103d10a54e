/**
 * Who is signed in, for this tab only: the JWT and the user in sessionStorage (gone when the tab
 * closes), dropped on sign out and on any 401. Screens subscribe to it with `useSession`. In a
 * multi-tenant deployment, the tenant (the user's organization) is kept for the tab too, across
 * sign-outs, and sent as X-Tenant.
 */
import type { SignedIn } from "plinth/client"
import { useEffect, useState } from "preact/hooks"

export type User = SignedIn["user"]

export interface Session {
  readonly token: string
  readonly user: User
}

const TOKEN_KEY = "plinth.token"
const USER_KEY = "plinth.user"
const TENANT_KEY = "plinth.tenant"

const read = (): Session | null => {
  const token = sessionStorage.getItem(TOKEN_KEY)
  const user = sessionStorage.getItem(USER_KEY)
  if (token === null || user === null) return null
  try {
    return { token, user: JSON.parse(user) as User }
  } catch {
    return null
  }
}

let current: Session | null = read()
/** Why the last session ended, said once on the sign-in screen. */
let endedBecause: string | null = null
const listeners = new Set<() => void>()
const emit = () => listeners.forEach((listener) => listener())

export const session = {
  get: (): Session | null => current,
  signIn: (token: string, user: User) => {
    sessionStorage.setItem(TOKEN_KEY, token)
    sessionStorage.setItem(USER_KEY, JSON.stringify(user))
    current = { token, user }
    endedBecause = null
    emit()
  },
  updateUser: (user: User) => {
    if (current === null) return
    session.signIn(current.token, user)
  },
  signOut: (reason: string | null = null) => {
    sessionStorage.removeItem(TOKEN_KEY)
    sessionStorage.removeItem(USER_KEY)
    current = null
    endedBecause = reason
    emit()
  },
  /** Multi-tenant mode: the tenant every call names (X-Tenant); null until the user names one. */
  tenant: (): string | null => sessionStorage.getItem(TENANT_KEY),
  /** Names the tenant of the calls from now on (the sign-in form, a link's `tenant`). */
  setTenant: (name: string) => {
    if (sessionStorage.getItem(TENANT_KEY) === name) return
    sessionStorage.setItem(TENANT_KEY, name)
    emit()
  },
  /** Something the sign-in screen says once (a link that did not work). */
  say: (text: string) => {
    endedBecause = text
  },
  /** The reason the last session ended, or what `say` left (once). */
  takeEndReason: (): string | null => {
    const reason = endedBecause
    endedBecause = null
    return reason
  },
  subscribe: (listener: () => void) => {
    listeners.add(listener)
    return () => {
      listeners.delete(listener)
    }
  }
}

export const useSession = (): Session | null => {
  const [value, setValue] = useState(current)
  useEffect(() => session.subscribe(() => setValue(current)), [])
  return value
}

/** Whether the JWT's `exp` has passed (read without verifying: the server decides, this only avoids a doomed call). */
export const isExpired = (token: string): boolean => {
  try {
    const payload = JSON.parse(atob((token.split(".")[1] ?? "").replace(/-/g, "+").replace(/_/g, "/"))) as { exp?: unknown }
    return typeof payload.exp === "number" && payload.exp * 1000 < Date.now()
  } catch {
    return true
  }
}
