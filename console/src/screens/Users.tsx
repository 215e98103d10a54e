/**
 * Users, for owners and admins (GET /admin/users, POST /admin/invite, PATCH /admin/users/:id,
 * POST /admin/users/:id/resend-invite). What is offered follows the server's rules: an owner
 * manages everyone, an admin only staff and members and gives no one the owner or admin role;
 * nobody manages themselves. The server decides in the end, and its refusals are shown.
 */
import { useEffect, useState } from "preact/hooks"
import { call, describe, errorTag, listUsers, type UserAccount } from "../api.ts"
import { formatTime, Message, roleLabel, useTitle } from "../components.tsx"
import type { User } from "../session.ts"

type Role = UserAccount["role"]
const ALL_ROLES: ReadonlyArray<Role> = ["owner", "admin", "staff", "member"]
const STAFF_ROLES: ReadonlyArray<Role> = ["staff", "member"]

type Note = { readonly kind: "status" | "error"; readonly text: string } | null

const refusal = (error: unknown, what: string): string => {
  switch (errorTag(error)) {
    case "Forbidden":
      return `You may not ${what}: ${describe(error)}`
    case "BadGateway":
      return `The invitation email could not be sent. ${describe(error)}`
    default:
      return describe(error)
  }
}

export const Users = (props: { readonly me: User }) => {
  useTitle("Users")
  const assignable = props.me.role === "owner" ? ALL_ROLES : STAFF_ROLES
  const [users, setUsers] = useState<ReadonlyArray<UserAccount> | null>(null)
  const [loadError, setLoadError] = useState<string | null>(null)
  const [note, setNote] = useState<Note>(null)
  const [invite, setInvite] = useState<{ email: string; role: Role }>({ email: "", role: "member" })
  const [busy, setBusy] = useState(false)

  const load = () =>
    listUsers().then(
      (list) => {
        setUsers(list)
        setLoadError(null)
      },
      (error) => setLoadError(describe(error))
    )
  useEffect(() => {
    void load()
  }, [])

  /** Whether this screen offers to manage `user` (the server checks again). */
  const manageable = (user: UserAccount) =>
    user.id !== props.me.id && (props.me.role === "owner" || STAFF_ROLES.includes(user.role))

  const act = async (what: string, done: string, run: () => Promise<unknown>) => {
    setBusy(true)
    setNote(null)
    try {
      await run()
      setNote({ kind: "status", text: done })
    } catch (error) {
      setNote({ kind: "error", text: refusal(error, what) })
    } finally {
      setBusy(false)
      await load()
    }
  }

  const sendInvite = (event: Event) => {
    event.preventDefault()
    const email = invite.email.trim()
    void act("invite this user", `An invitation was sent to ${email}.`, async () => {
      await call((client) => client.run((c) => c.mainApi.account.invite({ payload: { email, role: invite.role } })))
      setInvite({ email: "", role: invite.role })
    })
  }
  const update = (user: UserAccount, change: { role?: Role; is_active?: boolean }, done: string) =>
    act("change this user", done, () => call((client) => client.run((c) => c.mainApi.users.update({ params: { id: user.id }, payload: change }))))
  const resend = (user: UserAccount) =>
    act(
      "resend this invitation",
      `A new invitation was sent to ${user.email}.`,
      () => call((client) => client.run((c) => c.mainApi.users.resendInvite({ params: { id: user.id } })))
    )

  return (
    <main>
      <h1 tabIndex={-1}>Users</h1>
      <form onSubmit={sendInvite} aria-labelledby="invite-heading" class="inline">
        <h2 id="invite-heading">Invite a user</h2>
        <div>
          <label for="invite-email">Email</label>
          <input id="invite-email" type="email" required maxLength={320} value={invite.email} onInput={(event) => setInvite({ ...invite, email: event.currentTarget.value })} />
        </div>
        <div>
          <label for="invite-role">Role</label>
          <select id="invite-role" value={invite.role} onChange={(event) => setInvite({ ...invite, role: event.currentTarget.value as Role })}>
            {assignable.map((role) => <option key={role} value={role}>{roleLabel(role)}</option>)}
          </select>
        </div>
        <button type="submit" disabled={busy}>Send invitation</button>
      </form>
      {note !== null ? <Message kind={note.kind}>{note.text}</Message> : null}
      {loadError !== null ? <Message kind="error">The users could not be listed: {loadError}</Message> : null}
      {users === null
        ? (loadError === null ? <p role="status">Loading users…</p> : null)
        : (
          <table>
            <caption>All users</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Email</th>
                <th scope="col">Role</th>
                <th scope="col">Status</th>
                <th scope="col">Last sign-in</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {users.map((user) => (
                <tr key={user.id}>
                  <td>{user.display_name}</td>
                  <td>{user.email}</td>
                  <td>
                    {manageable(user)
                      ? (
                        <select
                          aria-label={`Role of ${user.email}`}
                          value={user.role}
                          disabled={busy}
                          onChange={(event) => {
                            const role = event.currentTarget.value as Role
                            void update(user, { role }, `${user.email} is now ${roleLabel(role).toLowerCase()}.`)
                          }}
                        >
                          {(assignable.includes(user.role) ? assignable : [user.role, ...assignable]).map((role) => (
                            <option key={role} value={role}>{roleLabel(role)}</option>
                          ))}
                        </select>
                      )
                      : roleLabel(user.role)}
                  </td>
                  <td>{user.is_active ? "Active" : "Deactivated"}</td>
                  <td>{formatTime(user.last_sign_in_at)}</td>
                  <td>
                    {manageable(user)
                      ? (
                        <div class="actions">
                          <button
                            type="button"
                            class="secondary"
                            disabled={busy}
                            aria-label={`${user.is_active ? "Deactivate" : "Activate"} ${user.email}`}
                            onClick={() =>
                              void update(
                                user,
                                { is_active: !user.is_active },
                                `${user.email} is ${user.is_active ? "deactivated: they can no longer sign in" : "active again"}.`
                              )}
                          >
                            {user.is_active ? "Deactivate" : "Activate"}
                          </button>
                          {user.is_active && user.last_sign_in_at === null
                            ? (
                              <button type="button" class="secondary" disabled={busy} aria-label={`Resend invitation to ${user.email}`} onClick={() => void resend(user)}>
                                Resend invitation
                              </button>
                            )
                            : null}
                        </div>
                      )
                      : null}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
    </main>
  )
}
