/**
 * TRUSTED_PROXIES: the peers whose client-address header (CLIENT_IP_HEADER) Plinth believes. A
 * comma-separated list of CIDR blocks, IPv4 and IPv6 (a bare address is one host); an IPv4-mapped
 * IPv6 peer (`::ffff:a.b.c.d`, what a dual-stack socket reports) matches the IPv4 blocks.
 */
import { Effect, Option, Schema, SchemaIssue, SchemaTransformation } from "effect"
import { BlockList, isIP } from "node:net"

export interface Cidr {
  readonly address: string
  readonly prefix: number
  readonly family: "ipv4" | "ipv6"
}

const CidrSchema = Schema.Struct({
  address: Schema.String,
  prefix: Schema.Int,
  family: Schema.Literals(["ipv4", "ipv6"])
})

/** Loopback only: a proxy on the same host is believed, a client from another host never is. */
export const DEFAULT_TRUSTED_PROXIES: ReadonlyArray<Cidr> = [
  { address: "127.0.0.0", prefix: 8, family: "ipv4" },
  { address: "::1", prefix: 128, family: "ipv6" }
]

/** `10.0.0.0/8`, `fd00::/8`, `192.0.2.7` (one host); none for anything else. */
export const parseCidr = (text: string): Option.Option<Cidr> => {
  const match = /^([^/\s]+)(?:\/(\d{1,3}))?$/.exec(text.trim())
  if (match === null) return Option.none()
  const address = match[1]!
  const version = isIP(address)
  if (version === 0 || address.includes("%")) return Option.none()
  const family = version === 4 ? "ipv4" : "ipv6"
  const bits = version === 4 ? 32 : 128
  const prefix = match[2] === undefined ? bits : Number(match[2])
  return prefix <= bits ? Option.some({ address, prefix, family }) : Option.none()
}

/**
 * The blocks of a comma-separated list, or the first entry that is not one. `none` trusts no proxy
 * (an empty variable counts as unset, so it cannot say that).
 */
export const parseCidrList = (text: string): { readonly _tag: "Ok"; readonly cidrs: ReadonlyArray<Cidr> } | { readonly _tag: "Invalid"; readonly entry: string } => {
  const cidrs: Array<Cidr> = []
  if (text.trim().toLowerCase() === "none") return { _tag: "Ok", cidrs }
  for (const entry of text.split(",").map((part) => part.trim()).filter((part) => part !== "")) {
    const cidr = parseCidr(entry)
    if (Option.isNone(cidr)) return { _tag: "Invalid", entry }
    cidrs.push(cidr.value)
  }
  return { _tag: "Ok", cidrs }
}

/** TRUSTED_PROXIES as the configuration reads it. */
export const TrustedProxies = Schema.String.pipe(
  Schema.decodeTo(
    Schema.Array(CidrSchema),
    SchemaTransformation.transformEffect({
      decode: (text: string) => {
        const parsed = parseCidrList(text)
        return parsed._tag === "Ok"
          ? Effect.succeed(parsed.cidrs)
          : Effect.fail(new SchemaIssue.InvalidValue({
            message: `Expected comma-separated CIDR blocks such as 127.0.0.0/8,::1 (or none); not a CIDR block: ${JSON.stringify(parsed.entry.slice(0, 60))}`
          }))
      },
      encode: (cidrs: ReadonlyArray<Cidr>) => Effect.succeed(cidrs.map((cidr) => `${cidr.address}/${cidr.prefix}`).join(","))
    })
  )
)

/** Whether a socket's peer address lies in one of `cidrs`; an unknown or unparsable address never does. */
export const makeProxyMatcher = (cidrs: ReadonlyArray<Cidr>): (peer: string | undefined) => boolean => {
  if (cidrs.length === 0) return () => false
  const blocks = new BlockList()
  for (const cidr of cidrs) blocks.addSubnet(cidr.address, cidr.prefix, cidr.family)
  return (peer) => {
    if (peer === undefined) return false
    const version = isIP(peer)
    if (version === 0) return false
    try {
      return blocks.check(peer, version === 4 ? "ipv4" : "ipv6")
    } catch {
      return false
    }
  }
}
