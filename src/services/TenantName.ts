/**
 * Tenant names (multi-tenant mode): what X-Tenant may say, and how a name becomes a database URL.
 */

export const TENANT_NAME = /^[a-z][a-z0-9_]{0,62}$/

/** Names that are databases of the cluster itself, never a tenant's. */
export const RESERVED_TENANT_NAMES = new Set(["postgres", "template0", "template1", "plinth"])

/** `postgres://…/{tenant}` with the tenant's name in place (the name is a checked identifier). */
export const tenantUrl = (template: string, tenant: string): string => template.replaceAll("{tenant}", tenant)

/** The template derived from a single-tenant URL: the same server and role, database `{tenant}`. */
export const deriveTenantTemplate = (url: string): string => {
  const parsed = new URL(url)
  parsed.pathname = "/{tenant}"
  return parsed.toString().replace("%7Btenant%7D", "{tenant}")
}
