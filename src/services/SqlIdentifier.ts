/**
 * The one quoting helper for SQL identifiers that come from outside the code (table, schema, role
 * and database names). Values never go through here: they are bound as parameters.
 */

/** `"name"`, with embedded double quotes doubled; NUL cannot be represented and is refused. */
export const quoteIdentifier = (name: string): string => {
  if (name.length === 0 || name.includes("\u0000")) throw new RangeError("not a valid SQL identifier")
  return `"${name.replaceAll("\"", "\"\"")}"`
}

/** A name PostgreSQL takes unquoted: a letter or `_`, then letters, digits or `_`, 63 characters at most. */
const NAME = "[a-z_][a-z0-9_]{0,62}"

/** A lower-case unquoted name: the schemas, tables and columns of apps (sys.apps admits no other). */
export const PLAIN_NAME = new RegExp(`^${NAME}$`)

/** `schema.name` or `name`, either in any case: the schema is group 1 (or absent), the name group 2. */
export const QUALIFIED_NAME = new RegExp(`^(?:(${NAME})\\.)?(${NAME})$`, "i")
