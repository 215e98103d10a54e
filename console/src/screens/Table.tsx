/**
 * A table's screen: its rows through its read view, 50 a page by keyset paging, sorted by a column
 * (a header's button), searched over its text columns and filtered by its choice, boolean and
 * reference columns (a reference with the picker), each value shown by its display type; rows
 * added, changed and deleted where the caller may. The count is introspection's `stats`
 * (estimated above 100,000 rows), exact on request.
 */
import { useEffect, useMemo, useState } from "preact/hooks"
import { call, describe, type Introspection, sql } from "../api.ts"
import { Message, useTitle } from "../components.tsx"
import { labelOf, type NavEntry } from "../navigation.ts"
import { type App, appPath } from "../paths.ts"
import { Link } from "../router.tsx"
import { BulkActions, bulkEnabled, type BulkSelection, selectionWords } from "../table/BulkActions.tsx"
import { type Column, countWords, ESTIMATED_ABOVE, rowName, type TableModel, tableModel } from "../table/model.ts"
import { ReferencePicker } from "../table/ReferencePicker.tsx"
import { RowForm } from "../table/RowForm.tsx"
import { countStatement, type Cursor, deleteStatement, type PageQuery, pageStatement, type Sort } from "../table/statements.ts"
import { Value } from "../table/Value.tsx"

export const PAGE_SIZE = 50

type Navigation = ReadonlyArray<{ readonly schema: string; readonly entries: ReadonlyArray<NavEntry> }>
type Row = Readonly<Record<string, unknown>>

const plural = (count: number, word: string) => `${count.toLocaleString()} ${word}${count === 1 ? "" : "s"}`

export const TableScreen = (props: {
  readonly app: App
  readonly table: string
  readonly navigation: Navigation
  readonly schema: Introspection | null
  readonly onRowsChanged: () => void
}) => {
  const entry = props.navigation.flatMap((group) => group.entries).find((candidate) => candidate.name === props.table)
  const label = entry?.label ?? labelOf(props.table)
  useTitle(label)
  const model = useMemo(() => (props.schema === null || entry === undefined ? null : tableModel(props.schema, entry)), [props.schema, entry])
  return (
    <main>
      <h1 tabIndex={-1}>{label}</h1>
      {props.schema !== null && model === null
        ? <Message kind="error">This app has no table named {props.table}, or you may not read it.</Message>
        : null}
      {model === null || props.schema === null
        ? (props.schema === null ? <p role="status">Loading…</p> : <p><Link to={appPath(props.app.schema_name)}>Back to {props.app.display_name}</Link></p>)
        : <Rows model={model} schema={props.schema} app={props.app.schema_name} onChanged={props.onRowsChanged} />}
    </main>
  )
}

type Editing = { readonly row: Row | null } | null

const Rows = (props: { readonly model: TableModel; readonly schema: Introspection; readonly app: string; readonly onChanged: () => void }) => {
  const { model } = props
  const [chosenSort, setChosenSort] = useState<Sort | null | undefined>(undefined)
  const sort = chosenSort === undefined ? model.defaultSort : chosenSort
  const [searchInput, setSearchInput] = useState("")
  const [search, setSearch] = useState("")
  const [filters, setFilters] = useState<Readonly<Record<string, string>>>({})
  const [cursors, setCursors] = useState<ReadonlyArray<Cursor>>([])
  // The page shown, with what it was read by (so that its caption and aria-sort say what it shows).
  const [page, setPage] = useState<{ readonly rows: ReadonlyArray<Row>; readonly hasNext: boolean; readonly number: number; readonly sort: Sort | null } | null>(null)
  const [error, setError] = useState<string | null>(null)
  const [version, setVersion] = useState(0)
  const [editing, setEditing] = useState<Editing>(null)
  const [deleting, setDeleting] = useState<string | null>(null)
  const [note, setNote] = useState<{ readonly kind: "status" | "error"; readonly text: string } | null>(null)
  const [exactCount, setExactCount] = useState<number | null>(null)
  // Rows ticked for a bulk action (by their key's text), or every row matching, counted when chosen.
  const [ticked, setTicked] = useState<ReadonlyMap<string, unknown>>(new Map())
  const [allMatching, setAllMatching] = useState<{ readonly count: number; readonly estimated: boolean } | null>(null)

  useEffect(() => {
    const timer = setTimeout(() => setSearch(searchInput.trim()), 250)
    return () => clearTimeout(timer)
  }, [searchInput])

  const referenceColumns = model.columns.filter((column) => column.referenceTable !== null)
  const activeFilters = [...model.filterColumns, ...referenceColumns].flatMap((column) => {
    const chosen = filters[column.name] ?? ""
    return chosen === "" ? [] : [{ column: column.name, value: column.displayType === "boolean" ? chosen === "true" : chosen }]
  })
  const filtered = search !== "" || activeFilters.length > 0
  const query: PageQuery = {
    schema: model.schema,
    relation: model.readFrom,
    columns: model.selected,
    key: model.key,
    sort,
    notNull: model.notNull,
    search,
    searchColumns: model.searchColumns,
    filters: activeFilters,
    after: cursors.at(-1) ?? null,
    limit: model.key.length > 0 ? PAGE_SIZE + 1 : PAGE_SIZE
  }
  const statement = pageStatement(query)
  // Introspection is read again at every move: the rows only when what they are read by changes.
  const reading = JSON.stringify([statement, props.app, version])

  useEffect(() => {
    let live = true
    const number = cursors.length + 1
    sql(statement.sql, statement.params, props.app).then(
      (rows) => {
        if (!live) return
        setPage({ rows: rows.slice(0, PAGE_SIZE), hasNext: rows.length > PAGE_SIZE, number, sort })
        setError(null)
      },
      (failure) => live && setError(describe(failure))
    )
    return () => {
      live = false
    }
  }, [reading])

  const restart = () => {
    setCursors([])
    setExactCount(null)
    setTicked(new Map())
    setAllMatching(null)
  }
  const sortBy = (column: Column) => {
    const by = column.sortColumn
    if (by === null) return
    // Again on the same column: the other way.
    setChosenSort({ column: by, descending: sort !== null && sort.column === by ? !sort.descending : false })
    restart()
  }
  const next = () => {
    const last = page?.rows.at(-1)
    if (page === null || last === undefined) return
    const shownSort = page.sort
    setCursors([...cursors.slice(0, page.number - 1), { sortValue: shownSort === null ? null : last[shownSort.column] ?? null, key: model.key.map((name) => last[name]) }])
  }
  const countExactly = () => {
    const counting = countStatement(query)
    return sql(counting.sql, counting.params, props.app).then(
      (rows) => {
        const count = Number(rows[0]?.["count"] ?? 0)
        setExactCount(count)
        return count
      },
      (failure) => {
        setNote({ kind: "error", text: `The rows could not be counted: ${describe(failure)}` })
        return null
      }
    )
  }
  const selectAllMatching = async () => {
    // Unfiltered, stats' count says how many (estimated above 100,000 rows); filtered, they are counted.
    const count = exactCount ?? (filtered ? await countExactly() : model.count)
    if (count === null) return
    setAllMatching({ count, estimated: exactCount === null && !filtered && count > ESTIMATED_ABOVE })
  }
  const tick = (key: string, value: unknown, on: boolean) => {
    const next = new Map(ticked)
    if (on) next.set(key, value)
    else next.delete(key)
    setTicked(next)
  }
  const saved = (text: string) => {
    setEditing(null)
    setNote({ kind: "status", text })
    setVersion((count) => count + 1)
    props.onChanged()
  }
  const keyOf = (row: Row) => JSON.stringify(model.key.map((name) => row[name]))
  const remove = async (row: Row) => {
    const name = rowName(model, row)
    try {
      const removed = deleteStatement(model.schema, model.writeTo!, model.key, model.key.map((column) => row[column]))
      const answer = await call((client) => client.sql(removed.sql, removed.params), props.app)
      setNote(answer.rowCount === 0
        ? { kind: "error", text: `${name} was not deleted: it is gone, or you may not delete it.` }
        : { kind: "status", text: `${name} was deleted.` })
      setVersion((count) => count + 1)
      props.onChanged()
    } catch (failure) {
      setNote({ kind: "error", text: `${name} could not be deleted: ${describe(failure)}` })
    } finally {
      setDeleting(null)
    }
  }

  const countText = exactCount !== null
    ? plural(exactCount, filtered ? "matching row" : "row")
    : filtered || model.count === null
      ? null
      : countWords(model.count)
  const actions = model.canUpdate || model.canDelete
  const bulk = bulkEnabled(model)
  const selection: BulkSelection | null = allMatching !== null
    ? { kind: "matching", ...allMatching }
    : ticked.size > 0 ? { kind: "keys", keys: [...ticked.values()] } : null
  const pageKeys = (page?.rows ?? []).map((row) => [keyOf(row), row[model.key[0] ?? ""]] as const)
  const wholePage = pageKeys.length > 0 && pageKeys.every(([key]) => ticked.has(key))

  return (
    <>
      <div class="toolbar">
        <form role="search" aria-label={`Search ${model.label}`} class="inline" onSubmit={(event) => event.preventDefault()}>
          {model.searchColumns.length > 0
            ? (
              <div>
                <label for="table-search">Search</label>
                <input id="table-search" type="search" value={searchInput} onInput={(event) => {
                  setSearchInput(event.currentTarget.value)
                  restart()
                }} />
              </div>
            )
            : null}
          {model.filterColumns.map((column) => (
            <div key={column.name}>
              <label for={`filter-${column.name}`}>{column.label}</label>
              <select id={`filter-${column.name}`} value={filters[column.name] ?? ""} onChange={(event) => {
                setFilters({ ...filters, [column.name]: event.currentTarget.value })
                restart()
              }}>
                <option value="">Any</option>
                {column.displayType === "boolean"
                  ? [<option key="true" value="true">Yes</option>, <option key="false" value="false">No</option>]
                  : column.options.map((option) => <option key={option.value} value={option.value}>{option.label}</option>)}
              </select>
            </div>
          ))}
          {referenceColumns.map((column) => (
            <ReferencePicker
              key={column.name}
              id={`filter-${column.name}`}
              required={false}
              disabled={false}
              aria-invalid={undefined}
              aria-describedby={undefined}
              column={column}
              emptyLabel="Any"
              model={model}
              schema={props.schema}
              app={props.app}
              value={filters[column.name] ?? ""}
              currentLabel={null}
              onChange={(value) => {
                setFilters({ ...filters, [column.name]: value })
                restart()
              }}
            />
          ))}
        </form>
        {model.canInsert && editing?.row !== null
          ? <button type="button" onClick={() => setEditing({ row: null })}>New row</button>
          : null}
      </div>
      {editing !== null
        ? (
          <RowForm
            key={editing.row === null ? "new" : keyOf(editing.row)}
            model={model}
            schema={props.schema}
            app={props.app}
            row={editing.row}
            rowName={editing.row === null ? "" : rowName(model, editing.row)}
            onSaved={saved}
            onCancel={() => setEditing(null)}
          />
        )
        : null}
      {note !== null ? <Message kind={note.kind}>{note.text}</Message> : null}
      {error !== null ? <Message kind="error">The rows could not be read: {error}</Message> : null}
      <p class="count">
        {countText !== null ? <span>{countText}</span> : null}
        {exactCount === null && (filtered || (model.count !== null && model.count > ESTIMATED_ABOVE))
          ? <button type="button" class="secondary" onClick={countExactly}>{filtered ? "Count matching rows" : "Count exactly"}</button>
          : null}
      </p>
      {bulk && page !== null && (page.rows.length > 0 || selection !== null)
        ? (
          <div role="group" aria-label="Bulk actions" class="bulk toolbar">
            <div class="inline">
              <input
                id="select-page"
                type="checkbox"
                checked={allMatching !== null || wholePage}
                disabled={allMatching !== null || pageKeys.length === 0}
                onChange={(event) => {
                  const next = new Map(ticked)
                  for (const [key, value] of pageKeys) event.currentTarget.checked ? next.set(key, value) : next.delete(key)
                  setTicked(next)
                }}
              />
              <label for="select-page">Select all rows on this page</label>
            </div>
            <p role="status" class="hint">{selection === null ? "No rows selected." : `${selectionWords(selection, filtered).replace(/^a/, "A")} selected.`}</p>
            {allMatching === null
              ? <button type="button" class="secondary" onClick={() => void selectAllMatching()}>{filtered ? "Select all rows matching the search and filters" : "Select all rows"}</button>
              : null}
            {selection !== null
              ? <button type="button" class="secondary" onClick={() => { setTicked(new Map()); setAllMatching(null) }}>Clear the selection</button>
              : null}
            {selection !== null
              ? (
                <BulkActions
                  model={model}
                  schema={props.schema}
                  app={props.app}
                  selection={selection}
                  filtered={filtered}
                  query={query}
                  onDone={(done, changed) => {
                    setNote(done)
                    setTicked(new Map())
                    setAllMatching(null)
                    setExactCount(null)
                    if (changed) {
                      setVersion((count) => count + 1)
                      props.onChanged()
                    }
                  }}
                />
              )
              : null}
          </div>
        )
        : null}
      {page === null
        ? (error === null ? <p role="status">Loading rows…</p> : null)
        : (
          <>
            <div class="table-scroll">
              <table>
                <caption>{model.label}{page.number > 1 ? `, page ${page.number}` : ""}</caption>
                <thead>
                  <tr>
                    {model.columns.map((column) => {
                      const shown = page.sort
                      const sorted = shown !== null && shown.column === column.sortColumn
                      return (
                        <th key={column.name} scope="col" aria-sort={sorted ? (shown.descending ? "descending" : "ascending") : undefined}>
                          {column.sortColumn === null
                            ? column.label
                            : (
                              <button type="button" class="sort" onClick={() => sortBy(column)}>
                                {column.label}
                                <span aria-hidden="true">{sorted ? (shown.descending ? " ▼" : " ▲") : ""}</span>
                              </button>
                            )}
                        </th>
                      )
                    })}
                    {actions ? <th scope="col">Actions</th> : null}
                  </tr>
                </thead>
                <tbody>
                  {page.rows.map((row) => {
                    const key = keyOf(row)
                    const name = rowName(model, row)
                    return (
                      <tr key={key}>
                        {model.columns.map((column) => <td key={column.name} class={`type-${column.displayType}`}><Value column={column} row={row} /></td>)}
                        {actions
                          ? (
                            <td>
                              <div class="actions">
                                {bulk
                                  ? (
                                    <input
                                      type="checkbox"
                                      aria-label={`Select ${name}`}
                                      checked={allMatching !== null || ticked.has(key)}
                                      disabled={allMatching !== null}
                                      onChange={(event) => tick(key, row[model.key[0] ?? ""], event.currentTarget.checked)}
                                    />
                                  )
                                  : null}
                                {deleting === key
                                  ? (
                                    <>
                                      <button type="button" aria-label={`Yes, delete ${name}`} onClick={() => void remove(row)}>Yes, delete</button>
                                      <button type="button" class="secondary" aria-label={`Keep ${name}`} onClick={() => setDeleting(null)}>Keep</button>
                                    </>
                                  )
                                  : (
                                    <>
                                      {model.canUpdate ? <button type="button" class="secondary" aria-label={`Edit ${name}`} onClick={() => setEditing({ row })}>Edit</button> : null}
                                      {model.canDelete ? <button type="button" class="secondary" aria-label={`Delete ${name}`} onClick={() => setDeleting(key)}>Delete</button> : null}
                                    </>
                                  )}
                              </div>
                            </td>
                          )
                          : null}
                      </tr>
                    )
                  })}
                </tbody>
              </table>
            </div>
            {page.rows.length === 0 ? <p>{filtered ? "No rows match." : "No rows yet."}</p> : null}
            <nav aria-label="Pages" class="pager">
              <button type="button" class="secondary" disabled={page.number === 1} onClick={() => setCursors(cursors.slice(0, page.number - 2))}>Previous page</button>
              <span>Page {page.number}</span>
              <button type="button" class="secondary" disabled={!page.hasNext} onClick={next}>Next page</button>
            </nav>
          </>
        )}
    </>
  )
}
