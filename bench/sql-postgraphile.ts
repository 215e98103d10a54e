/**
 * The third server issue #8 names for `sql-read`: PostGraphile 5 (Amber preset, node:http through
 * grafserv) over the same table, answering the same read as a GraphQL query by primary key. The
 * JWT is verified with jose on every request, as PostGraphile's docs advise (`grafast.context`),
 * and its claims become the transaction's settings (`role`, `app.user_id`), so the same
 * row-level security policy decides what the caller sees.
 */
import { jwtVerify } from "jose"
import { createServer } from "node:http"
import { postgraphile } from "postgraphile"
import { makePgService } from "postgraphile/adaptors/pg"
import { grafserv } from "postgraphile/grafserv/node"
import { PostGraphileAmberPreset } from "postgraphile/presets/amber"
import { type ComparatorServer, listenComparator } from "./support.ts"

/** The read of `sql-read` in GraphQL: the row whose primary key is `$id`, if the caller may see it. */
export const POSTGRAPHILE_READ = "query ($id: BigInt!) { benchItemByRowId(rowId: $id) { rowId payload hits } }"

export const startPostGraphile = async (databaseUrl: string, jwtSecret: string, connections: number): Promise<ComparatorServer> => {
  const key = new TextEncoder().encode(jwtSecret)
  const instance = postgraphile({
    extends: [PostGraphileAmberPreset],
    pgServices: [makePgService({ connectionString: databaseUrl, schemas: ["public"], poolConfig: { max: connections } })],
    grafast: {
      context: async (requestContext) => {
        const authorization = requestContext.node?.req.headers.authorization ?? ""
        const { payload } = await jwtVerify(authorization.slice("Bearer ".length), key, { algorithms: ["HS256"] })
        return { pgSettings: { role: String(payload["role"]), "app.user_id": String(payload.sub) } }
      }
    },
    grafserv: { graphqlPath: "/graphql", graphiql: false, watch: false }
  })
  const server = createServer()
  instance.createServ(grafserv).addTo(server)
  return listenComparator(server, async () => instance.release())
}
