/**
 * The form that adds or changes a row: an input by display type for each column the caller may
 * write, required where the column must have a value and has no default, a new row's fields filled
 * with their defaults (left empty, the database's default applies), a choice as a select, a
 * reference as a picker. The database's refusal is said on the form, naming the field it is about.
 */
import { useState } from "preact/hooks"
import { call, describe, type Introspection } from "../api.ts"
import type { Field, TableModel } from "./model.ts"
import { ReferencePicker } from "./ReferencePicker.tsx"
import { insertStatement, type Statement, updateStatement } from "./statements.ts"

type Row = Readonly<Record<string, unknown>>
type Values = Readonly<Record<string, string>>

const pad = (n: number) => String(n).padStart(2, "0")
/** An instant as a datetime-local input writes it (the browser's time zone). */
const localInput = (iso: string) => {
  const time = new Date(iso)
  if (Number.isNaN(time.getTime())) return ""
  return `${time.getFullYear()}-${pad(time.getMonth() + 1)}-${pad(time.getDate())}T${pad(time.getHours())}:${pad(time.getMinutes())}`
}

const formValue = (field: Field, value: unknown): string => {
  if (value === null || value === undefined) return ""
  switch (field.displayType) {
    case "json":
      return JSON.stringify(value, null, 2)
    case "datetime":
      return localInput(String(value))
    default:
      return String(value)
  }
}

/** A value the form itself cannot send (JSON that does not parse). */
export class FieldError {
  readonly field: Field
  readonly message: string
  constructor(field: Field, message: string) {
    this.field = field
    this.message = message
  }
}

/** The form's text as the value to bind. */
export const bound = (field: Field, text: string): unknown => {
  switch (field.displayType) {
    case "boolean":
      return text === "true"
    case "json":
      try {
        return JSON.parse(text) as unknown
      } catch {
        throw new FieldError(field, `${field.label} is not valid JSON.`)
      }
    case "datetime":
      return new Date(text).toISOString()
    default:
      return text
  }
}

/** The field a database error is about: the column its detail or message names. */
export const fieldOf = (error: unknown, fields: ReadonlyArray<Field>, table: string): Field | undefined => {
  const body = typeof error === "object" && error !== null && "error" in error ? error.error : undefined
  if (typeof body !== "object" || body === null) return undefined
  const { detail, message } = body as { detail?: unknown; message?: unknown }
  const words = `${typeof detail === "string" ? detail : ""} ${typeof message === "string" ? message : ""}`
  const named = [/Key \(([^)]+)\)=/, /column "([^"]+)"/, /choice column (\S+) /]
    .flatMap((pattern) => pattern.exec(words)?.[1]?.split(", ") ?? [])
  // A unique column's constraint, as PostgreSQL names it (`<table>_<column>_key`), when the detail is left out.
  return fields.find((field) => named.includes(field.name) || words.includes(`"${table}_${field.name}_key"`))
}

const INPUT_TYPES: Readonly<Record<string, string>> = {
  email: "email",
  url: "url",
  number: "number",
  currency: "number",
  date: "date",
  datetime: "datetime-local"
}

export const RowForm = (props: {
  readonly model: TableModel
  readonly schema: Introspection
  readonly app: string
  /** The row to change; null for a new one. */
  readonly row: Row | null
  readonly rowName: string
  readonly onSaved: (message: string) => void
  readonly onCancel: () => void
}) => {
  const { model, row } = props
  const fields = model.fields.filter((field) => (row === null ? field.canInsert : field.canUpdate))
  const initial: Values = Object.fromEntries(fields.map((field) => [field.name, row === null ? field.defaultValue ?? "" : formValue(field, row[field.name])]))
  const [values, setValues] = useState<Values>(initial)
  const [error, setError] = useState<{ readonly text: string; readonly field: string | null } | null>(null)
  const [busy, setBusy] = useState(false)
  const set = (name: string, value: string) => setValues((current) => ({ ...current, [name]: value }))
  const heading = row === null ? `New row in ${model.label}` : `Edit ${props.rowName}`

  const statement = (): Statement | null => {
    const table = model.writeTo!
    if (row === null) {
      // Empty fields are left out: the column's default (or NULL) applies.
      const given = fields.filter((field) => values[field.name] !== "")
      return insertStatement(model.schema, table, given.map((field) => [field.name, bound(field, values[field.name]!)] as const))
    }
    const changed = fields.filter((field) => values[field.name] !== initial[field.name])
    if (changed.length === 0) return null
    return updateStatement(
      model.schema,
      table,
      changed.map((field) => [field.name, values[field.name] === "" ? null : bound(field, values[field.name]!)] as const),
      model.key,
      model.key.map((name) => row[name])
    )
  }

  const submit = async (event: Event) => {
    event.preventDefault()
    setBusy(true)
    setError(null)
    try {
      const built = statement()
      if (built === null) {
        props.onSaved("Nothing was changed.")
        return
      }
      const written = await call((client) => client.sql(built.sql, built.params), props.app)
      if (written.rowCount === 0) {
        setError({ text: "This row was not changed: it is gone, or you may not change it.", field: null })
        return
      }
      props.onSaved(row === null ? `A row was added to ${model.label}.` : `${props.rowName} was saved.`)
    } catch (failure) {
      if (failure instanceof FieldError) setError({ text: failure.message, field: failure.field.name })
      else {
        const field = fieldOf(failure, fields, model.writeTo ?? "")
        setError({ text: `${field === undefined ? "" : `${field.label}: `}${describe(failure)}`, field: field?.name ?? null })
      }
    } finally {
      setBusy(false)
    }
  }

  const input = (field: Field) => (
    <FieldInput
      field={field}
      id={`field-${field.name}`}
      value={values[field.name] ?? ""}
      onChange={(next) => set(field.name, next)}
      disabled={busy}
      invalid={error?.field === field.name}
      errorId="form-error"
      model={model}
      schema={props.schema}
      app={props.app}
      currentLabel={row === null ? null : String(row[`${field.name}_display`] ?? "")}
    />
  )

  return (
    <form onSubmit={submit} aria-labelledby="row-form-heading" class="stacked row-form">
      <h2 id="row-form-heading">{heading}</h2>
      {fields.map((field) =>
        field.displayType === "reference"
          ? <div key={field.name}>{input(field)}</div>
          : (
            <div key={field.name}>
              <label for={`field-${field.name}`}>{field.label}{field.required ? " (required)" : ""}</label>
              {input(field)}
            </div>
          )
      )}
      {error !== null ? <p id="form-error" role="alert" class="message error">{error.text}</p> : null}
      <div class="actions">
        <button type="submit" disabled={busy}>{row === null ? "Add row" : "Save changes"}</button>
        <button type="button" class="secondary" onClick={props.onCancel}>Cancel</button>
      </div>
    </form>
  )
}

/** A field's input by its display type: a select for a choice or a boolean, a picker for a reference, a textarea for JSON. */
export const FieldInput = (props: {
  readonly field: Field
  readonly id: string
  readonly value: string
  readonly onChange: (value: string) => void
  readonly disabled: boolean
  readonly invalid: boolean
  /** The element that says what is wrong, when `invalid`. */
  readonly errorId: string
  readonly model: TableModel
  readonly schema: Introspection
  readonly app: string
  /** A reference's shown value for the current one. */
  readonly currentLabel: string | null
}) => {
  const { field, value } = props
  const common = {
    id: props.id,
    required: field.required,
    disabled: props.disabled,
    "aria-invalid": props.invalid ? true : undefined,
    "aria-describedby": props.invalid ? props.errorId : undefined
  }
  const set = props.onChange
  switch (field.displayType) {
    case "choice":
      return (
        <select {...common} value={value} onChange={(event) => set(event.currentTarget.value)}>
          {field.required && value !== "" ? null : <option value="">(none)</option>}
          {field.options.map((option) => <option key={option.value} value={option.value}>{option.label}</option>)}
        </select>
      )
    case "boolean":
      return (
        <select {...common} value={value} onChange={(event) => set(event.currentTarget.value)}>
          {field.required && value !== "" ? null : <option value="">(none)</option>}
          <option value="true">Yes</option>
          <option value="false">No</option>
        </select>
      )
    case "json":
      return <textarea {...common} rows={4} value={value} onInput={(event) => set(event.currentTarget.value)} />
    case "reference":
      return (
        <ReferencePicker
          {...common}
          column={field}
          model={props.model}
          schema={props.schema}
          app={props.app}
          value={value}
          currentLabel={props.currentLabel}
          onChange={set}
        />
      )
    default:
      return (
        <input
          {...common}
          // Preact types each input type apart; the one chosen here takes what the others do.
          type={(INPUT_TYPES[field.displayType] ?? "text") as "text"}
          step={field.displayType === "currency" ? "0.01" : field.displayType === "number" ? (/^(integer|bigint|smallint)$/.test(field.type) ? "1" : "any") : undefined}
          value={value}
          onInput={(event) => set(event.currentTarget.value)}
        />
      )
  }
}
