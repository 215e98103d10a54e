/**
 * The one quoting helper for SQL identifiers that come from outside the code (table, schema, role
 * and database names). Values never go through here: they are bound as parameters.
 */

/** `"name"`, with embedded double quotes doubled; NUL cannot be represented and is refused. */
export const quoteIdentifier = (name: string): string => {
  if (name.length === 0 || name.includes("\u0000")) throw new RangeError("not a valid SQL identifier")
  return `"${name.replaceAll("\"", "\"\"")}"`
}
