/** The addresses of the console's screens, and the app they belong to. */

export interface App {
  readonly schema_name: string
  readonly display_name: string
  readonly description: string
}

export const appPath = (schema: string) => `/apps/${encodeURIComponent(schema)}`
export const tablePath = (schema: string, table: string) => `${appPath(schema)}/tables/${encodeURIComponent(table)}`
export const pagePath = (schema: string, slug: string) => `${appPath(schema)}/pages/${encodeURIComponent(slug)}`
