/**
 * Bulk actions of the table screen: one field set to one value, or the rows deleted, for the rows
 * ticked or for every row matching the search and filters. Each is one statement through POST /sql
 * (so one transaction: all rows or none), and row-level security decides which rows it touches:
 * the answer's row count is what is reported.
 */
import { useEffect, useRef, useState } from "preact/hooks"
import { call, describe, type Introspection } from "../api.ts"
import type { TableModel } from "./model.ts"
import { bound, FieldError, FieldInput, fieldOf } from "./RowForm.tsx"
import { bulkDeleteStatement, bulkUpdateStatement, type BulkRows, type BulkTarget, type PageQuery, type Statement } from "./statements.ts"

/** What is chosen: some rows by key, or every row matching (counted when chosen; `estimated` from stats). */
export type BulkSelection =
  | { readonly kind: "keys"; readonly keys: ReadonlyArray<unknown> }
  | { readonly kind: "matching"; readonly count: number; readonly estimated: boolean }

const rows = (count: number) => `${count.toLocaleString()} ${count === 1 ? "row" : "rows"}`

/** The selection in words: "2 rows", "all ≈ 1,000,000 matching rows". */
export const selectionWords = (selection: BulkSelection, filtered: boolean): string =>
  selection.kind === "keys"
    ? rows(selection.keys.length)
    : `all ${selection.estimated ? "≈ " : ""}${selection.count.toLocaleString()} ${filtered ? "matching " : ""}${selection.count === 1 ? "row" : "rows"}`

export const bulkEnabled = (model: TableModel): boolean =>
  model.writeTo !== null && model.key.length === 1 && (model.canUpdate || model.canDelete)

type Mode = "edit" | "delete" | null

export const BulkActions = (props: {
  readonly model: TableModel
  readonly schema: Introspection
  readonly app: string
  readonly selection: BulkSelection
  readonly filtered: boolean
  /** The screen's query: its search and filters choose the rows of an "all matching" selection. */
  readonly query: PageQuery
  /** After an action: what happened, and whether rows were written. */
  readonly onDone: (note: { readonly kind: "status" | "error"; readonly text: string }, changed: boolean) => void
}) => {
  const { model, selection } = props
  const [mode, setMode] = useState<Mode>(null)
  const fields = model.fields.filter((field) => field.canUpdate)
  const [column, setColumn] = useState(fields[0]?.name ?? "")
  const [value, setValue] = useState("")
  const [error, setError] = useState<{ readonly text: string; readonly invalid: boolean } | null>(null)
  const [busy, setBusy] = useState(false)
  const heading = useRef<HTMLHeadingElement>(null)
  const field = fields.find((candidate) => candidate.name === column)
  const chosen = selectionWords(selection, props.filtered)
  const count = selection.kind === "keys" ? selection.keys.length : selection.count

  useEffect(() => {
    if (mode !== null) heading.current?.focus()
  }, [mode])

  const target: BulkTarget = { schema: model.schema, table: model.writeTo!, key: model.key[0]!, keyIsUuid: model.keyIsUuid }
  const which: BulkRows = selection.kind === "keys" ? { kind: "keys", keys: selection.keys } : { kind: "matching", query: props.query }

  const run = async (statement: () => Statement, done: (rowCount: number) => string, refused: string) => {
    setBusy(true)
    setError(null)
    try {
      const built = statement()
      const answer = await call((client) => client.sql(built.sql, built.params), props.app)
      setMode(null)
      props.onDone(
        answer.rowCount === 0 ? { kind: "error", text: `No rows were ${refused}: they are gone, or you may not change them.` } : { kind: "status", text: done(answer.rowCount) },
        answer.rowCount > 0
      )
    } catch (failure) {
      if (failure instanceof FieldError) setError({ text: failure.message, invalid: true })
      else {
        const named = field === undefined ? undefined : fieldOf(failure, [field], target.table)
        // One statement: a refusal leaves every row as it was.
        setError({ text: `Nothing was changed. ${named === undefined ? "" : `${named.label}: `}${describe(failure)}`, invalid: named !== undefined })
      }
    } finally {
      setBusy(false)
    }
  }

  const update = (event: Event) => {
    event.preventDefault()
    if (field === undefined) return
    void run(
      () => bulkUpdateStatement(target, field.name, value === "" ? null : bound(field, value), which),
      (n) => `${rows(n)} updated.`,
      "updated"
    )
  }
  const remove = () => void run(() => bulkDeleteStatement(target, which), (n) => `${rows(n)} deleted.`, "deleted")

  const close = () => {
    setMode(null)
    setError(null)
  }

  return (
    <>
      <div class="actions">
        {model.canUpdate && fields.length > 0
          ? <button type="button" class="secondary" aria-expanded={mode === "edit"} onClick={() => setMode("edit")}>Edit a field of {chosen}</button>
          : null}
        {model.canDelete ? <button type="button" class="secondary" aria-expanded={mode === "delete"} onClick={() => setMode("delete")}>Delete {chosen}</button> : null}
      </div>
      {mode === "edit" && field !== undefined
        ? (
          <div role="dialog" aria-labelledby="bulk-heading" class="row-form">
            <form onSubmit={update} aria-labelledby="bulk-heading" class="stacked">
              <h2 id="bulk-heading" tabIndex={-1} ref={heading}>Edit {chosen}</h2>
              <label for="bulk-column">Field</label>
              <select id="bulk-column" value={column} disabled={busy} onChange={(event) => {
                setColumn(event.currentTarget.value)
                setValue("")
                setError(null)
              }}>
                {fields.map((candidate) => <option key={candidate.name} value={candidate.name}>{candidate.label}</option>)}
              </select>
              <div key={field.name}>
                {field.displayType === "reference" ? null : <label for="bulk-value">{field.label}{field.required ? " (required)" : ""}</label>}
                <FieldInput
                  field={field}
                  id="bulk-value"
                  value={value}
                  onChange={setValue}
                  disabled={busy}
                  invalid={error?.invalid ?? false}
                  errorId="bulk-error"
                  model={model}
                  schema={props.schema}
                  app={props.app}
                  currentLabel={null}
                />
              </div>
              {error !== null ? <p id="bulk-error" role="alert" class="message error">{error.text}</p> : null}
              <div class="actions">
                <button type="submit" disabled={busy}>Set {field.label} in {rows(count)}</button>
                <button type="button" class="secondary" onClick={close}>Cancel</button>
              </div>
            </form>
          </div>
        )
        : null}
      {mode === "delete"
        ? (
          <div role="alertdialog" aria-labelledby="bulk-heading" aria-describedby="bulk-warning" class="row-form">
            <h2 id="bulk-heading" tabIndex={-1} ref={heading}>Delete {chosen}?</h2>
            <p id="bulk-warning">
              {selection.kind === "matching" && selection.estimated ? "About " : ""}{rows(count)} will be deleted, in one go: this cannot be undone.
            </p>
            {error !== null ? <p id="bulk-error" role="alert" class="message error">{error.text}</p> : null}
            <div class="actions">
              <button type="button" disabled={busy} onClick={remove}>Yes, delete {rows(count)}</button>
              <button type="button" class="secondary" onClick={close}>Keep them</button>
            </div>
          </div>
        )
        : null}
    </>
  )
}
