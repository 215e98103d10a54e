import * as net from "node:net"

/** A bare TCP client of 127.0.0.1:`port` that sends `request` as is and collects what comes back. */
export const rawClient = (port: number, request: string) => {
  const socket = net.connect(port, "127.0.0.1")
  let received = ""
  socket.setEncoding("latin1")
  socket.on("data", (chunk: string) => (received += chunk))
  socket.on("error", () => undefined)
  const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()))
  socket.write(request)
  return { socket, received: () => received, closed }
}
