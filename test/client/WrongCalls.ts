/**
 * Client calls that must not compile: `npm run typecheck` checks this file (it is never run). Each
 * wrong call carries `@ts-expect-error`, so if the client stopped rejecting one, the unused
 * directive would fail the typecheck.
 */
import { Effect, Stream } from "effect"
import type { AsyncPlinthClient, PlinthClient } from "../../src/client/index.ts"

export const wrongCalls = (client: PlinthClient, plain: AsyncPlinthClient) => [
  // @ts-expect-error /sql takes `sql`, not `query`
  client.mainApi.data.sql({ payload: { query: "SELECT 1" } }),
  // @ts-expect-error an invitation's role is one of owner, admin, staff, member
  client.mainApi.account.invite({ payload: { email: "new@plinth.test", role: "root" } }),
  // @ts-expect-error a conversation's id is a path parameter
  client.chatApi.conversations.get({ payload: { id: "c" } }),
  // @ts-expect-error /sql cannot fail with NotFound: there is no such tag to catch
  Effect.catchTag(client.mainApi.data.sql({ payload: { sql: "SELECT 1" } }), "NotFound", () => Effect.void),
  // @ts-expect-error a `token` event's data is `{ text }`
  Stream.map(client.chat("c", "hi"), (event) => (event.event === "token" ? event.data.title : "")),
  // @ts-expect-error a page_change names its schema and slug, nothing else
  Stream.map(client.events(), (event) => (event.event === "page_change" ? event.data.id : "")),
  // @ts-expect-error params are an array
  plain.sql("SELECT $1", { one: 1 })
]

/** The same calls, written right, compile: the directives above fail for the reason they name. */
export const rightCalls = (client: PlinthClient, plain: AsyncPlinthClient) => [
  client.mainApi.data.sql({ payload: { sql: "SELECT 1" } }),
  client.mainApi.account.invite({ payload: { email: "new@plinth.test", role: "member" } }),
  client.chatApi.conversations.get({ params: { id: "c" } }),
  Effect.catchTag(client.mainApi.data.sql({ payload: { sql: "SELECT 1" } }), "Unauthorized", () => Effect.void),
  Stream.map(client.chat("c", "hi"), (event) => (event.event === "token" ? event.data.text : "")),
  Stream.map(client.events(), (event) => (event.event === "page_change" ? event.data.slug : "")),
  plain.sql("SELECT $1", [1])
]
