/** The audit trail, newest first (GET /admin/audit), for owners and admins. */
import { useEffect, useState } from "preact/hooks"
import { type AuditEvent, describe, listAuditEvents, listUsers } from "../api.ts"
import { formatTime, Message, useTitle } from "../components.tsx"

const PAGE = 100
const MOST = 1000

export const Audit = () => {
  useTitle("Audit")
  const [limit, setLimit] = useState(PAGE)
  const [events, setEvents] = useState<ReadonlyArray<AuditEvent> | null>(null)
  const [error, setError] = useState<string | null>(null)
  // Users by id, so that events name people by their address (the trail keeps ids).
  const [emails, setEmails] = useState<ReadonlyMap<string, string>>(new Map())
  useEffect(() => {
    listUsers().then((users) => setEmails(new Map(users.map((user) => [user.id, user.email]))), () => undefined)
  }, [])
  const person = (id: string | null) => (id === null ? null : emails.get(id) ?? id)
  useEffect(() => {
    listAuditEvents(limit).then(
      (answer) => {
        setEvents(answer.events)
        setError(null)
      },
      (failure) => setError(describe(failure))
    )
  }, [limit])
  return (
    <main>
      <h1 tabIndex={-1}>Audit</h1>
      <p>Every change to who may sign in and to the schema, newest first.</p>
      {error !== null ? <Message kind="error">The audit trail could not be read: {error}</Message> : null}
      {events === null
        ? (error === null ? <p role="status">Loading events…</p> : null)
        : (
          <>
            <table>
              <caption>The {events.length === 1 ? "latest event" : `latest ${events.length} events`}</caption>
              <thead>
                <tr>
                  <th scope="col">Time</th>
                  <th scope="col">Action</th>
                  <th scope="col">Target</th>
                  <th scope="col">Actor</th>
                  <th scope="col">Details</th>
                </tr>
              </thead>
              <tbody>
                {events.map((event) => (
                  <tr key={event.id}>
                    <td>{formatTime(event.at)}</td>
                    <td>{event.action}</td>
                    <td>{event.action.startsWith("user.") && event.action !== "user.sign_in_failed" ? person(event.target) : event.target ?? ""}</td>
                    <td>{event.actor_role}{event.actor_id === null ? "" : ` ${person(event.actor_id)}`}</td>
                    <td><code>{Object.keys(event.details).length === 0 ? "" : JSON.stringify(event.details)}</code></td>
                  </tr>
                ))}
              </tbody>
            </table>
            {events.length === limit && limit < MOST
              ? <button type="button" class="secondary" onClick={() => setLimit(Math.min(MOST, limit + PAGE))}>Show older events</button>
              : null}
          </>
        )}
    </main>
  )
}
