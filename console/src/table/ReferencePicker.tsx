/**
 * A reference's picker: a search over the referenced table's display columns, on the server (at
 * most 20 options at a time), and the select of the matching rows. Forms pick a row's reference
 * with it, the table screen filters by one.
 */
import { useEffect, useState } from "preact/hooks"
import { describe, type Introspection, sql } from "../api.ts"
import { type Column, pickerSource, type TableModel } from "./model.ts"
import { pickerStatement } from "./statements.ts"

export const ReferencePicker = (props: {
  readonly id: string
  readonly required: boolean
  readonly disabled: boolean
  readonly "aria-invalid": boolean | undefined
  readonly "aria-describedby": string | undefined
  readonly column: Column
  /** What the empty choice says: "(none)" in a form, "Any" in a filter. */
  readonly emptyLabel?: string
  readonly model: TableModel
  readonly schema: Introspection
  readonly app: string
  readonly value: string
  readonly currentLabel: string | null
  readonly onChange: (value: string) => void
}) => {
  const field = props.column
  const [search, setSearch] = useState("")
  const [options, setOptions] = useState<ReadonlyArray<{ readonly value: string; readonly label: string }>>([])
  const [failure, setFailure] = useState<string | null>(null)
  // The chosen row's name, kept while another search lists other rows.
  const [chosenLabel, setChosenLabel] = useState<string | null>(props.currentLabel)
  useEffect(() => {
    let live = true
    const source = pickerSource(props.schema, props.model, field.referenceTable ?? "")
    const timer = setTimeout(() => {
      const statement = pickerStatement(props.model.schema, source.relation, source.displayColumns, search.trim())
      sql(statement.sql, statement.params, props.app).then(
        (rows) => {
          if (!live) return
          setOptions(rows.map((row) => ({ value: String(row["value"]), label: String(row["label"] ?? "") })))
          setFailure(null)
        },
        (error) => live && setFailure(describe(error))
      )
    }, search === "" ? 0 : 250)
    return () => {
      live = false
      clearTimeout(timer)
    }
  }, [search])
  const current = props.value !== "" && !options.some((option) => option.value === props.value)
    ? [{ value: props.value, label: chosenLabel === null || chosenLabel === "" ? props.value : chosenLabel }]
    : []
  const status = `${props.id}-status`
  return (
    <fieldset class="picker">
      <legend>{field.label}{props.required ? " (required)" : ""}</legend>
      <label for={`${props.id}-search`}>Search {field.label.toLowerCase()}</label>
      <input id={`${props.id}-search`} type="search" value={search} disabled={props.disabled} aria-describedby={status} onInput={(event) => setSearch(event.currentTarget.value)} />
      <label for={props.id}>{field.label}</label>
      <select
        id={props.id}
        required={props.required}
        disabled={props.disabled}
        aria-invalid={props["aria-invalid"]}
        aria-describedby={props["aria-describedby"]}
        value={props.value}
        onChange={(event) => {
          const value = event.currentTarget.value
          setChosenLabel(options.find((option) => option.value === value)?.label ?? null)
          props.onChange(value)
        }}
      >
        <option value="">{props.emptyLabel ?? "(none)"}</option>
        {[...current, ...options].map((option) => <option key={option.value} value={option.value}>{option.label}</option>)}
      </select>
      <p id={status} class="hint" aria-live="polite">
        {failure ?? (options.length === 0 ? "No matching rows." : options.length === 20 ? "The first 20 matching rows." : `${options.length} matching ${options.length === 1 ? "row" : "rows"}.`)}
      </p>
    </fieldset>
  )
}
