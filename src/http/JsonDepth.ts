/** How deep request JSON may nest, as a schema check the API definitions and the plain routes share. */
import { Schema } from "effect"

/** How deep request JSON may nest: deeper values are not data anyone means to send. */
export const MAX_JSON_DEPTH = 64

const depthWithin = (value: unknown, limit: number): boolean => {
  const stack: Array<readonly [unknown, number]> = [[value, 1]]
  while (stack.length > 0) {
    const [current, depth] = stack.pop()!
    if (typeof current !== "object" || current === null) continue
    if (depth > limit) return false
    for (const child of Array.isArray(current) ? current : Object.values(current)) stack.push([child, depth + 1])
  }
  return true
}

/** A schema check: the value nests at most MAX_JSON_DEPTH levels. */
export const isShallowJson = Schema.makeFilter((value: unknown) =>
  depthWithin(value, MAX_JSON_DEPTH) || `nested deeper than ${MAX_JSON_DEPTH} levels`
)
