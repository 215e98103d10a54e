/**
 * Changes the console itself made (a chat tool that created a table or a page): the shell refetches
 * introspection and redraws the open screen at once, without waiting for the next move.
 */
import { useEffect, useRef } from "preact/hooks"

const listeners = new Set<() => void>()

/** Says that the schema, the data or a page has just changed. */
export const announceChange = () => listeners.forEach((listener) => listener())

/** Calls `onChange` whenever a change is announced. */
export const useChanges = (onChange: () => void) => {
  const latest = useRef(onChange)
  latest.current = onChange
  useEffect(() => {
    const listener = () => latest.current()
    listeners.add(listener)
    return () => {
      listeners.delete(listener)
    }
  }, [])
}
