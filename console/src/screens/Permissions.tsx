/**
 * Who may read, write and delete the rows of each managed table of the current app, for staff,
 * members and visitors (sys.get_table_permissions / sys.set_table_permissions), for owners and admins.
 * Each change is saved at once: one cell is one call, so a refusal concerns only that cell.
 */
import { useEffect, useState } from "preact/hooks"
import { describe, sql } from "../api.ts"
import { Message, roleLabel, useTitle } from "../components.tsx"
import { labelOf } from "../navigation.ts"
import type { App } from "../paths.ts"

const ROLES = ["staff", "member", "anon"] as const
const ACTIONS = ["read", "write", "delete"] as const
const LEVELS = [{ value: "all", label: "All" }, { value: "own", label: "Own" }, { value: "none", label: "None" }] as const

type Role = typeof ROLES[number]
type Action = typeof ACTIONS[number]
interface Permission {
  readonly table_name: string
  readonly role: string
  readonly read: string
  readonly write: string
  readonly delete: string
}

const roleName = (role: string) => (role === "anon" ? "Anon (not signed in)" : roleLabel(role))
const cellKey = (table: string, role: string, action: string) => `${table}/${role}/${action}`

export const Permissions = (props: { readonly app: App }) => {
  useTitle("Permissions")
  const schema = props.app.schema_name
  const [rows, setRows] = useState<ReadonlyArray<Permission> | null>(null)
  const [error, setError] = useState<string | null>(null)
  // Per cell: the save under way, the last one saved, or why it was refused.
  const [cells, setCells] = useState<ReadonlyMap<string, { readonly kind: "saving" | "saved" | "error"; readonly text: string }>>(new Map())
  useEffect(() => {
    setRows(null)
    sql("SELECT table_name, role, read, write, delete FROM sys.get_table_permissions()", [], schema).then(
      (answer) => {
        setRows(answer as unknown as ReadonlyArray<Permission>)
        setError(null)
      },
      (failure) => setError(describe(failure))
    )
  }, [schema])

  const setCell = (key: string, state: { readonly kind: "saving" | "saved" | "error"; readonly text: string } | null) =>
    setCells((current) => {
      const next = new Map(current)
      if (state === null) next.delete(key)
      else next.set(key, state)
      return next
    })

  const save = async (row: Permission, action: Action, level: string) => {
    const key = cellKey(row.table_name, row.role, action)
    const wanted = { ...row, [action]: level }
    setCell(key, { kind: "saving", text: "Saving…" })
    try {
      await sql("SELECT sys.set_table_permissions($1, $2, $3, $4, $5)", [row.table_name, row.role, wanted.read, wanted.write, wanted.delete], schema)
      setRows((current) => current?.map((known) => (known.table_name === row.table_name && known.role === row.role ? wanted : known)) ?? null)
      setCell(key, { kind: "saved", text: "Saved" })
    } catch (failure) {
      setCell(key, { kind: "error", text: `Not saved: ${describe(failure)}` })
    }
  }

  const tables = rows === null ? [] : [...new Set(rows.map((row) => row.table_name))]
  return (
    <main>
      <h1 tabIndex={-1}>Permissions</h1>
      <p>
        What staff, members and anon (people not signed in) may do with the rows of each table of {props.app.display_name}:
        all rows, only their own (the rows they created), or none. Owners and admins may always do everything. Each change is saved at once.
      </p>
      {error !== null ? <Message kind="error">The permissions could not be read: {error}</Message> : null}
      {rows === null
        ? (error === null ? <p role="status">Loading permissions…</p> : null)
        : tables.length === 0
        ? <p>This app has no tables yet.</p>
        : (
          <table class="permissions">
            <caption>Permissions of the tables of {props.app.display_name}</caption>
            <thead>
              <tr>
                <th scope="col" rowSpan={2}>Table</th>
                {ROLES.map((role) => <th key={role} scope="colgroup" colSpan={ACTIONS.length}>{roleName(role)}</th>)}
              </tr>
              <tr>
                {ROLES.flatMap((role) => ACTIONS.map((action) => <th key={`${role}/${action}`} scope="col">{action.charAt(0).toUpperCase() + action.slice(1)}</th>))}
              </tr>
            </thead>
            <tbody>
              {tables.map((table) => (
                <tr key={table}>
                  <th scope="row">{labelOf(table)}</th>
                  {ROLES.flatMap((role: Role) => {
                    const row = rows.find((known) => known.table_name === table && known.role === role)
                    return ACTIONS.map((action) => {
                      const key = cellKey(table, role, action)
                      const id = `permission-${key.replace(/[^A-Za-z0-9_-]/g, "-")}`
                      const state = cells.get(key)
                      return (
                        <td key={key}>
                          {row === undefined
                            ? "—"
                            : (
                              <>
                                <select
                                  id={id}
                                  aria-label={`${labelOf(table)}: ${role} ${action}`}
                                  aria-describedby={state === undefined ? undefined : `${id}-state`}
                                  aria-invalid={state?.kind === "error" ? true : undefined}
                                  value={row[action]}
                                  disabled={state?.kind === "saving"}
                                  onChange={(event) => void save(row, action, event.currentTarget.value)}
                                >
                                  {LEVELS.map((level) => <option key={level.value} value={level.value}>{level.label}</option>)}
                                </select>
                                {state === undefined ? null : (
                                  <span id={`${id}-state`} class={`cell-state ${state.kind}`} role={state.kind === "error" ? "alert" : "status"}>
                                    {state.text}
                                  </span>
                                )}
                              </>
                            )}
                        </td>
                      )
                    })
                  })}
                </tr>
              ))}
            </tbody>
          </table>
        )}
    </main>
  )
}
