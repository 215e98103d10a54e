/**
 * The navigation of an app, drawn from introspection by its `write_target` rules (docs/api.md,
 * "POST /"): a read view `<t>_v` stands for its table `<t>` (read from the view, written to the
 * table), a table that has such a view is not listed itself, other views are listed as they are
 * (read only), and Plinth's own relations (`is_system`) are left out.
 */

/** What of a relation of introspection (POST /) the navigation reads. */
export interface Relation {
  readonly table_name: string
  readonly schema_name: string
  readonly kind: string
  readonly can_select: boolean
  readonly write_target: string | null
  readonly is_system: boolean
}

export interface NavEntry {
  /** The schema the relation is in. */
  readonly schema: string
  /** What the entry is called in the address: the table (for a read view, its table). */
  readonly name: string
  readonly label: string
  /** The relation to read rows from (a read view, or the table itself). */
  readonly readFrom: string
  /** The table writes go to; null for a view that has none. */
  readonly writeTo: string | null
}

/** `order_lines` → `Order lines`. */
export const labelOf = (name: string): string => {
  const words = name.replace(/_+/g, " ").trim()
  return words === "" ? name : words.charAt(0).toUpperCase() + words.slice(1)
}

const entryOf = (relation: Relation): NavEntry | null => {
  if (relation.is_system || !relation.can_select) return null
  // A table with a read view: its view stands for it.
  if (relation.write_target === null && relation.kind === "table") return null
  const name = relation.write_target ?? relation.table_name
  return { schema: relation.schema_name, name, label: labelOf(name), readFrom: relation.table_name, writeTo: relation.write_target }
}

/** The entries of each schema, the app's first and then public's, each sorted by label. */
export const navigationOf = (relations: ReadonlyArray<Relation>, appSchema: string): ReadonlyArray<{ readonly schema: string; readonly entries: ReadonlyArray<NavEntry> }> => {
  const bySchema = new Map<string, Map<string, NavEntry>>()
  for (const relation of relations) {
    const entry = entryOf(relation)
    if (entry === null) continue
    const entries = bySchema.get(entry.schema) ?? new Map<string, NavEntry>()
    // A read view wins over its table, should both come.
    if (!entries.has(entry.name) || entry.readFrom !== entry.name) entries.set(entry.name, entry)
    bySchema.set(entry.schema, entries)
  }
  const order = appSchema === "public" ? ["public"] : [appSchema, "public"]
  return order.flatMap((schema) => {
    const entries = bySchema.get(schema)
    return entries === undefined || entries.size === 0 ? [] : [{ schema, entries: [...entries.values()].sort((a, b) => a.label.localeCompare(b.label)) }]
  })
}
