/**
 * The statements of the table screen, built from introspected names: every identifier goes through
 * `quote`, every value is a bind parameter. Pages are keyset pages (no OFFSET): the next one
 * continues after the last row's sort value and key, so page 10,000 costs what page 1 does.
 */

/** An identifier as PostgreSQL quotes it: in double quotes, its own double quotes doubled. */
export const quote = (identifier: string): string => `"${identifier.replaceAll('"', '""')}"`

/** `schema.relation`, both quoted. */
export const qualified = (schema: string, relation: string): string => `${quote(schema)}.${quote(relation)}`

export interface Statement {
  readonly sql: string
  readonly params: ReadonlyArray<unknown>
}

export interface Sort {
  readonly column: string
  readonly descending: boolean
}

/** Where a page starts: after the row with this sort value and key. */
export interface Cursor {
  readonly sortValue: unknown
  readonly key: ReadonlyArray<unknown>
}

export interface PageQuery {
  readonly schema: string
  readonly relation: string
  readonly columns: ReadonlyArray<string>
  /** The key columns (the primary key): the order's tie-breaker, never null. */
  readonly key: ReadonlyArray<string>
  readonly sort: Sort | null
  /** Columns never null: sorted by one, the order needs no NULLS LAST and the cursor is one row comparison, which an index serves. */
  readonly notNull?: ReadonlyArray<string>
  /** Text searched (ILIKE, anywhere) in `searchColumns`; empty for none. */
  readonly search: string
  readonly searchColumns: ReadonlyArray<string>
  /** Equality filters (a choice's value, a boolean). */
  readonly filters: ReadonlyArray<{ readonly column: string; readonly value: unknown }>
  readonly after: Cursor | null
  /** Rows to read (a page and one more, to know whether there is a next page). */
  readonly limit: number
}

/** A LIKE pattern matching `text` anywhere (its `%`, `_` and `\` taken literally). */
export const containsPattern = (text: string): string => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`

const list = (names: ReadonlyArray<string>) => names.map(quote).join(", ")

/** A statement's parameters: `param(value)` adds one and gives its placeholder. */
const parameters = () => {
  const params: Array<unknown> = []
  return { params, param: (value: unknown) => `$${params.push(value)}` }
}

/** The search's and the filters' conditions. */
const matching = (query: PageQuery, param: (value: unknown) => string): Array<string> => {
  const where: Array<string> = []
  if (query.search !== "" && query.searchColumns.length > 0) {
    const pattern = param(containsPattern(query.search))
    where.push(`(${query.searchColumns.map((column) => `${quote(column)}::text ILIKE ${pattern}`).join(" OR ")})`)
  }
  for (const filter of query.filters) where.push(`${quote(filter.column)} = ${param(filter.value)}`)
  return where
}

const whereClause = (where: ReadonlyArray<string>) => (where.length === 0 ? "" : ` WHERE ${where.join(" AND ")}`)

/** One page of rows: filtered, searched, in the sort's order (nulls last) then the key's, after the cursor. */
export const pageStatement = (query: PageQuery): Statement => {
  const { params, param } = parameters()
  const where = matching(query, param)
  const descending = query.sort?.descending ?? false
  const after = descending ? "<" : ">"
  const direction = descending ? "DESC" : "ASC"
  const key = `(${list(query.key)})`
  const neverNull = query.sort !== null && (query.notNull ?? []).includes(query.sort.column)
  if (query.after !== null) {
    const sortValue = query.after.sortValue
    const value = query.sort === null || sortValue === null || sortValue === undefined ? null : param(sortValue)
    const keyValues = query.after.key.map(param).join(", ")
    const keyAfter = `${key} ${after} (${keyValues})`
    if (query.sort === null) where.push(keyAfter)
    else if (neverNull && value !== null) where.push(`(${quote(query.sort.column)}, ${list(query.key)}) ${after} (${value}, ${keyValues})`)
    else {
      const sorted = quote(query.sort.column)
      // Nulls come last: after a value, the greater values and the nulls; after a null, only nulls.
      where.push(value === null ? `(${sorted} IS NULL AND ${keyAfter})` : `(${sorted} ${after} ${value} OR (${sorted} = ${value} AND ${keyAfter}) OR ${sorted} IS NULL)`)
    }
  }
  const order = [
    ...(query.sort === null ? [] : [`${quote(query.sort.column)} ${direction}${neverNull ? "" : " NULLS LAST"}`]),
    ...query.key.map((column) => `${quote(column)} ${direction}`)
  ]
  const sql = `SELECT ${list(query.columns)} FROM ${qualified(query.schema, query.relation)}${whereClause(where)}` +
    ` ORDER BY ${order.join(", ")} LIMIT ${param(query.limit)}`
  return { sql, params }
}

/** The rows matching the search and filters, counted exactly (on request: a count reads every one). */
export const countStatement = (query: PageQuery): Statement => {
  const { params, param } = parameters()
  const where = matching(query, param)
  return { sql: `SELECT count(*) AS count FROM ${qualified(query.schema, query.relation)}${whereClause(where)}`, params }
}

/** A new row: only the columns given (the others take their defaults). */
export const insertStatement = (schema: string, table: string, values: ReadonlyArray<readonly [string, unknown]>): Statement =>
  values.length === 0
    ? { sql: `INSERT INTO ${qualified(schema, table)} DEFAULT VALUES`, params: [] }
    : {
      sql: `INSERT INTO ${qualified(schema, table)} (${list(values.map(([name]) => name))}) VALUES (${values.map((_, i) => `$${i + 1}`).join(", ")})`,
      params: values.map(([, value]) => value)
    }

const keyMatch = (key: ReadonlyArray<string>, first: number) => `(${list(key)}) = (${key.map((_, i) => `$${first + i}`).join(", ")})`

/** Changes the row of this key. */
export const updateStatement = (
  schema: string,
  table: string,
  values: ReadonlyArray<readonly [string, unknown]>,
  key: ReadonlyArray<string>,
  keyValues: ReadonlyArray<unknown>
): Statement => ({
  sql: `UPDATE ${qualified(schema, table)} SET ${values.map(([name], i) => `${quote(name)} = $${i + 1}`).join(", ")} WHERE ${keyMatch(key, values.length + 1)}`,
  params: [...values.map(([, value]) => value), ...keyValues]
})

export const deleteStatement = (schema: string, table: string, key: ReadonlyArray<string>, keyValues: ReadonlyArray<unknown>): Statement => ({
  sql: `DELETE FROM ${qualified(schema, table)} WHERE ${keyMatch(key, 1)}`,
  params: [...keyValues]
})

/** Searches shorter than this have no trigram to look up: they look through the newest `PICKER_RECENT` rows only. */
export const PICKER_SEARCH_ALL_FROM = 3

/** How many of the newest rows the picker looks through before it looks further (an index walk of this many rows). */
export const PICKER_RECENT = 5000

/**
 * The picker's options: at most `limit` rows of a referenced relation whose display columns contain
 * `search`, exact and then starting matches first, then by label. Each is bounded on a table of any
 * size: the newest `PICKER_RECENT` rows (by `newestFirst`, the (created_at, id) index every managed
 * table has) are read and the matches among them sorted; a table that small is searched whole. A
 * search of `PICKER_SEARCH_ALL_FROM` characters or more that finds fewer than `limit` there goes on
 * to the older rows through the display columns' trigram indexes (so as many rows as match).
 */
export const pickerStatement = (
  schema: string,
  relation: string,
  displayColumns: ReadonlyArray<string>,
  search: string,
  limit = 20,
  newestFirst: ReadonlyArray<string> = ["created_at", "id"]
): Statement => {
  const { params, param } = parameters()
  const from = qualified(schema, relation)
  const label = `concat_ws(' ', ${displayColumns.map((column) => `${quote(column)}::text`).join(", ")})`
  const newest = `ORDER BY ${newestFirst.map((column) => `${quote(column)} DESC`).join(", ")}`
  const recent = `(SELECT ${quote("id")} AS value, ${label} AS label FROM ${from} ${newest} LIMIT ${PICKER_RECENT}) AS recent`
  if (search === "") return { sql: `SELECT value, label FROM ${recent} ORDER BY label, value LIMIT ${param(limit)}`, params }
  const pattern = param(containsPattern(search))
  const escaped = search.replace(/[\\%_]/g, (c) => `\\${c}`)
  const order = `ORDER BY CASE WHEN label ILIKE ${param(escaped)} THEN 0 WHEN label ILIKE ${param(`${escaped}%`)} THEN 1 ELSE 2 END, label, value LIMIT ${param(limit)}`
  const inRecent = `SELECT value, label FROM ${recent} WHERE label ILIKE ${pattern} ${order}`
  if ([...search].length < PICKER_SEARCH_ALL_FROM) return { sql: inRecent, params }
  const matches = `(${displayColumns.map((column) => `${quote(column)}::text ILIKE ${pattern}`).join(" OR ")})`
  const key = `(${newestFirst.map(quote).join(", ")})`
  // The rows older than the newest PICKER_RECENT (none when the table has no more).
  const older = `${key} < (SELECT ${newestFirst.map(quote).join(", ")} FROM ${from} ${newest} OFFSET ${PICKER_RECENT - 1} LIMIT 1)`
  // Stated twice: under row-level security the planner guesses an ILIKE's selectivity from the
  // pattern's length alone, and a small guess makes it read the matches from the trigram index
  // rather than walk the whole newest-first index through rows that may not match.
  const inOlder = `SELECT value, label FROM (SELECT ${quote("id")} AS value, ${label} AS label FROM ${from} WHERE ${matches} AND ${matches} AND ${older}) AS older ${order}`
  // The outer LIMIT stops before the older rows are read when the newest fill it (UNION ALL keeps the parts' order).
  return { sql: `SELECT value, label FROM ((${inRecent}) UNION ALL (${inOlder})) AS options LIMIT ${param(limit)}`, params }
}

/** The rows a bulk action touches: these keys, or every row the screen's search and filters match. */
export type BulkRows =
  | { readonly kind: "keys"; readonly keys: ReadonlyArray<unknown> }
  | { readonly kind: "matching"; readonly query: PageQuery }

/** Where a bulk action writes: the table, its one key column, and whether that key is a uuid (a managed table's id). */
export interface BulkTarget {
  readonly schema: string
  readonly table: string
  readonly key: string
  readonly keyIsUuid: boolean
}

/** A PostgreSQL array literal of these values as text (each element quoted, its `"` and `\` escaped). */
export const arrayLiteral = (values: ReadonlyArray<unknown>): string =>
  `{${values.map((value) => `"${String(value).replace(/["\\]/g, (c) => `\\${c}`)}"`).join(",")}}`

/**
 * The condition choosing the rows: the keys as one bound array, or the screen's own search and
 * filters, run on the relation it reads (its read view: the filters may name a reference's shown value).
 */
const bulkCondition = (target: BulkTarget, rows: BulkRows, param: (value: unknown) => string): string => {
  const key = quote(target.key)
  if (rows.kind === "keys") {
    return target.keyIsUuid ? `${key} = ANY(${param(arrayLiteral(rows.keys))}::uuid[])` : `${key}::text = ANY(${param(arrayLiteral(rows.keys))}::text[])`
  }
  const where = matching(rows.query, param)
  if (rows.query.relation === target.table) return where.length === 0 ? "true" : where.join(" AND ")
  return `${key} IN (SELECT ${key} FROM ${qualified(rows.query.schema, rows.query.relation)}${whereClause(where)})`
}

/** One field set to one bound value in every chosen row: one statement, so one transaction. */
export const bulkUpdateStatement = (target: BulkTarget, column: string, value: unknown, rows: BulkRows): Statement => {
  const { params, param } = parameters()
  const set = `${quote(column)} = ${param(value)}`
  return { sql: `UPDATE ${qualified(target.schema, target.table)} SET ${set} WHERE ${bulkCondition(target, rows, param)}`, params }
}

/** Every chosen row deleted: one statement, so one transaction. */
export const bulkDeleteStatement = (target: BulkTarget, rows: BulkRows): Statement => {
  const { params, param } = parameters()
  return { sql: `DELETE FROM ${qualified(target.schema, target.table)} WHERE ${bulkCondition(target, rows, param)}`, params }
}
