/**
 * `plinth/client`: a typed client of Plinth's two services, derived from the same API definitions
 * the servers are built from. `make` / `Plinth.layer` for Effect programs, `createPlinthClient`
 * for everyone else (promises and async iterables).
 */
export { type ChatEvent, ChatEvent as ChatEventSchema, MessageContent, ToolCall } from "../http/ChatEvents.ts"
export { ChatApi } from "../http/ChatApi.ts"
export {
  BadGateway,
  BadRequest,
  Conflict,
  DatabaseError,
  DatabaseErrorBody,
  Forbidden,
  NotFound,
  PayloadTooLarge,
  PlainErrorBody,
  TooManyRequests,
  Unauthorized,
  Unavailable,
  UnsupportedMediaType
} from "../http/Errors.ts"
export { MainApi } from "../http/MainApi.ts"
export { PageChange, type PageEvent, PageEvent as PageEventSchema } from "../http/PageEvents.ts"
export * from "./PlinthClient.ts"
export * from "./AsyncClient.ts"
