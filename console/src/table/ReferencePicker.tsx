/**
 * A reference's picker: a search over the referenced table's display columns, on the server (at
 * most 20 options at a time, each search bounded however large the table: see `pickerStatement`),
 * and the select of the matching rows. Forms pick a row's reference with it, the table screen
 * filters by one.
 */
import { useEffect, useState } from "preact/hooks"
import { describe, type Introspection, sql } from "../api.ts"
import { type Column, pickerSource, type TableModel } from "./model.ts"
import { PICKER_RECENT, PICKER_SEARCH_ALL_FROM, pickerStatement } from "./statements.ts"

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
  // The search the options answer (the box may already hold the next one).
  const [answered, setAnswered] = useState("")
  const table = field.referenceTable ?? ""
  const searched = search.trim()
  // A search shorter than PICKER_SEARCH_ALL_FROM looks through the newest PICKER_RECENT rows only: said when the table has more.
  const tableRows = props.schema.stats.find((stat) => stat.relname === table)?.number_rows ?? 0
  const partly = answered !== "" && [...answered].length < PICKER_SEARCH_ALL_FROM && tableRows > PICKER_RECENT
  useEffect(() => {
    let live = true
    const source = pickerSource(props.schema, props.model, table)
    // Managed tables are read newest first by their (created_at, id) index; any other relation by its id.
    const dated = props.schema.relations.some((relation) =>
      relation.schema_name === props.model.schema && relation.table_name === table && relation.cols.some((column) => column.name === "created_at")
    )
    const timer = setTimeout(() => {
      const statement = pickerStatement(props.model.schema, source.relation, source.displayColumns, searched, 20, dated ? ["created_at", "id"] : ["id"])
      sql(statement.sql, statement.params, props.app).then(
        (rows) => {
          if (!live) return
          setOptions(rows.map((row) => ({ value: String(row["value"]), label: String(row["label"] ?? "") })))
          setAnswered(searched)
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
        {failure ?? (options.length === 0 ? "No matching rows." : options.length === 20 ? "The first 20 matching rows." : `${options.length} matching ${options.length === 1 ? "row" : "rows"}.`) +
          (partly ? ` Searched the newest ${PICKER_RECENT.toLocaleString("en-US")} rows: type ${PICKER_SEARCH_ALL_FROM} characters or more to search them all.` : "")}
      </p>
    </fieldset>
  )
}
