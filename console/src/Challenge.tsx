/**
 * The bot check (Cloudflare Turnstile) of the sign-in forms, only when the deployment has a site
 * key (CHALLENGE_SITE_KEY): its script is loaded then and never otherwise. A token is good once, so
 * the widget is reset after each use.
 */
import type { JSX } from "preact"
import { useEffect, useRef, useState } from "preact/hooks"

interface Turnstile {
  readonly render: (element: HTMLElement, options: Record<string, unknown>) => string
  readonly reset: (widget: string) => void
  readonly remove: (widget: string) => void
}
type WithTurnstile = typeof globalThis & { turnstile?: Turnstile }

const SCRIPT = "https://challenges.cloudflare.com/turnstile/v0/api.js?render=explicit"
let loading: Promise<Turnstile> | null = null

const loadTurnstile = (): Promise<Turnstile> => {
  loading ??= new Promise<Turnstile>((resolve, reject) => {
    const script = document.createElement("script")
    script.src = SCRIPT
    script.async = true
    script.onload = () => {
      const turnstile = (globalThis as WithTurnstile).turnstile
      if (turnstile === undefined) reject(new Error("the bot check did not load"))
      else resolve(turnstile)
    }
    script.onerror = () => reject(new Error("the bot check did not load"))
    document.head.append(script)
  })
  return loading
}

export interface Challenge {
  /** The widget's place in the form (nothing when no site key is configured). */
  readonly widget: JSX.Element | null
  /** The token to send, once the check passed; undefined while none is needed or given. */
  readonly token: string | undefined
  /** Whether the form may be sent (the check passed, or none is configured). */
  readonly ready: boolean
  /** After a token was used: a fresh check. */
  readonly reset: () => void
  readonly failure: string | null
}

export const useChallenge = (siteKey: string | null): Challenge => {
  const element = useRef<HTMLDivElement>(null)
  const widget = useRef<string | null>(null)
  const turnstile = useRef<Turnstile | null>(null)
  const [token, setToken] = useState<string | undefined>(undefined)
  const [failure, setFailure] = useState<string | null>(null)
  useEffect(() => {
    if (siteKey === null) return
    let live = true
    loadTurnstile().then(
      (loaded) => {
        if (!live || element.current === null) return
        turnstile.current = loaded
        widget.current = loaded.render(element.current, {
          sitekey: siteKey,
          callback: (value: string) => setToken(value),
          "expired-callback": () => setToken(undefined),
          "error-callback": () => setFailure("The bot check failed to run. Please reload the page.")
        })
      },
      () => live && setFailure("The bot check could not be loaded. Please check your connection and reload the page.")
    )
    return () => {
      live = false
      if (widget.current !== null) turnstile.current?.remove(widget.current)
    }
  }, [siteKey])
  return {
    widget: siteKey === null ? null : <div ref={element} />,
    token,
    ready: siteKey === null || token !== undefined,
    reset: () => {
      setToken(undefined)
      if (widget.current !== null) turnstile.current?.reset(widget.current)
    },
    failure
  }
}
