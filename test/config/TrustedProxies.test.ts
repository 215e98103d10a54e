/** TRUSTED_PROXIES: parsing (IPv4, IPv6, bare hosts, `none`), the start-up error, and matching peers. */
import { ConfigProvider, Effect, Option } from "effect"
import { describe, expect, it } from "vitest"
import { loadConfig } from "../../src/services/PlinthConfig.ts"
import { makeProxyMatcher, parseCidr, parseCidrList } from "../../src/services/TrustedProxies.ts"

const load = (env: Record<string, string>) =>
  Effect.runPromise(Effect.result(loadConfig.pipe(Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env }))))))

const matcher = (list: string) => {
  const parsed = parseCidrList(list)
  if (parsed._tag !== "Ok") throw new Error(`not a list: ${list}`)
  return makeProxyMatcher(parsed.cidrs)
}

describe("the setting", () => {
  it("defaults to loopback only: 127.0.0.0/8 and ::1", async () => {
    const result = await load({})
    if (result._tag === "Failure") throw new Error(result.failure.message)
    expect(result.success.trustedProxies).toEqual([
      { address: "127.0.0.0", prefix: 8, family: "ipv4" },
      { address: "::1", prefix: 128, family: "ipv6" }
    ])
  })

  it("reads IPv4 and IPv6 blocks and bare hosts, with spaces; none is the empty list", async () => {
    const result = await load({ TRUSTED_PROXIES: " 10.0.0.0/8, fd00::/8,192.0.2.7 " })
    if (result._tag === "Failure") throw new Error(result.failure.message)
    expect(result.success.trustedProxies).toEqual([
      { address: "10.0.0.0", prefix: 8, family: "ipv4" },
      { address: "fd00::", prefix: 8, family: "ipv6" },
      { address: "192.0.2.7", prefix: 32, family: "ipv4" }
    ])
    const none = await load({ TRUSTED_PROXIES: "none" })
    expect(none._tag === "Success" && none.success.trustedProxies).toEqual([])
  })

  it.each(["10.0.0.0/33", "::1/129", "10.0.0/8", "proxy.internal", "10.0.0.0/8,,garbage", "fe80::1%eth0", "10.0.0.0/-1"])(
    "%j stops start-up with one line naming TRUSTED_PROXIES",
    async (value) => {
      const result = await load({ TRUSTED_PROXIES: value })
      if (result._tag === "Success") throw new Error("expected a configuration error")
      expect(result.failure.message).not.toContain("\n")
      expect(result.failure.message).toMatch(/^invalid configuration: TRUSTED_PROXIES: \S/)
    }
  )
})

describe("matching a socket's peer address", () => {
  it("IPv4 blocks match IPv4 peers and their IPv4-mapped IPv6 form", () => {
    const trusted = matcher("127.0.0.0/8,10.1.0.0/16")
    for (const peer of ["127.0.0.1", "127.255.0.9", "::ffff:127.0.0.1", "10.1.200.3", "::ffff:10.1.0.1"]) expect(trusted(peer), peer).toBe(true)
    for (const peer of ["128.0.0.1", "10.2.0.1", "::ffff:10.2.0.1", "::1", "203.0.113.9"]) expect(trusted(peer), peer).toBe(false)
  })

  it("IPv6 blocks match IPv6 peers", () => {
    const trusted = matcher("::1,fd00::/8")
    for (const peer of ["::1", "fd12:3456::1"]) expect(trusted(peer), peer).toBe(true)
    for (const peer of ["::2", "fe80::1", "127.0.0.1", "2001:db8::1"]) expect(trusted(peer), peer).toBe(false)
  })

  it("no address, an unknown one, and an empty list trust nobody", () => {
    expect(matcher("127.0.0.0/8")(undefined)).toBe(false)
    expect(matcher("127.0.0.0/8")("unknown")).toBe(false)
    expect(matcher("none")("127.0.0.1")).toBe(false)
  })

  it("a bare address is one host", () => {
    expect(Option.map(parseCidr("192.0.2.7"), (cidr) => cidr.prefix)).toEqual(Option.some(32))
    expect(Option.map(parseCidr("2001:db8::1"), (cidr) => cidr.prefix)).toEqual(Option.some(128))
  })
})
