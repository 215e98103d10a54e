/**
 * Where a new tenant goes (issue #27): the active cluster with the fewest tenant databases among
 * those under their cap and within their connection budget (the connections open now, the live
 * tenants' pools and LISTEN connections among them, below max_connections minus a reserve).
 */

export interface ClusterLoad {
  readonly name: string
  readonly state: "active" | "draining"
  /** The cap on tenant databases; null: none. */
  readonly maxDatabases: number | null
  /** Tenant databases on it (a moved tenant's old copy counts until cleanup). */
  readonly databases: number
  /** Its max_connections and the client connections open now; absent when it could not be asked. */
  readonly connections?: { readonly max: number; readonly used: number }
}

export type Placed = { readonly _tag: "Placed"; readonly cluster: string } | { readonly _tag: "Full"; readonly reasons: ReadonlyArray<string> }

/** Why `cluster` cannot take another tenant, or undefined when it can. */
export const refusal = (cluster: ClusterLoad, reserve: number): string | undefined => {
  if (cluster.state !== "active") return `${cluster.name} is draining`
  if (cluster.maxDatabases !== null && cluster.databases >= cluster.maxDatabases) {
    return `${cluster.name} holds ${cluster.databases} of its ${cluster.maxDatabases} databases`
  }
  if (cluster.connections === undefined) return `${cluster.name} cannot be reached`
  const budget = cluster.connections.max - reserve
  if (cluster.connections.used >= budget) {
    return `${cluster.name} has ${cluster.connections.used} connections open, at its budget of ${budget} (max_connections ${cluster.connections.max} minus a reserve of ${reserve})`
  }
  return undefined
}

/** The cluster a new tenant goes to (ties by name), or every cluster's reason for refusing it. */
export const place = (clusters: ReadonlyArray<ClusterLoad>, reserve: number): Placed => {
  const open = clusters.filter((cluster) => refusal(cluster, reserve) === undefined)
    .sort((a, b) => a.databases - b.databases || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  if (open.length > 0) return { _tag: "Placed", cluster: open[0]!.name }
  return { _tag: "Full", reasons: clusters.map((cluster) => refusal(cluster, reserve)!) }
}
