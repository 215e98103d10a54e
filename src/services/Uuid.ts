/** A UUID in its textual form, in either case (ids of users, conversations and messages). */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** Whether `text` is a UUID: anything else cannot name a row, so it is refused before a query. */
export const isUuid = (text: string): boolean => UUID.test(text)
