/** GET with a bearer token, reading the JSON answer. */
export const get = async <T = unknown>(base: string, path: string, token?: string, headers: Record<string, string> = {}) => {
  const response = await fetch(`${base}${path}`, {
    headers: { ...(token === undefined ? {} : { authorization: `Bearer ${token}` }), ...headers }
  })
  const text = await response.text()
  return { status: response.status, body: (text === "" ? undefined : JSON.parse(text)) as T }
}
