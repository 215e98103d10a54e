/**
 * A TCP port that was free a moment ago (for servers that cannot be told to pick one themselves).
 * Chosen below the kernel's ephemeral range (32768–60999 on Linux): a port there, once checked and
 * released, could be taken before its server binds it by any outgoing connection or `listen(0)` of
 * the tests running beside (a `plinth start` once failed "port … is already in use" so).
 */
import { createServer } from "node:net"

const LOWEST = 20_000
const HIGHEST = 32_000

const canListen = (port: number) =>
  new Promise<boolean>((resolve) => {
    const server = createServer()
    server.unref()
    server.once("error", () => resolve(false))
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
  })

export const freePort = async (): Promise<number> => {
  for (;;) {
    const port = LOWEST + Math.floor(Math.random() * (HIGHEST - LOWEST))
    if (await canListen(port)) return port
  }
}
