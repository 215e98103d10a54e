/**
 * Email addresses in production logs, masked (`j***@example.com`): enough for an operator to match
 * a line with a report, not enough to harvest the addresses of everyone who signs in.
 */

const LOCAL = String.raw`[\p{L}\p{N}._%+!#$&'*/=?^\x60{|}~-]+`
const DOMAIN = String.raw`[\p{L}\p{N}](?:[\p{L}\p{N}-]*[\p{L}\p{N}])?(?:\.[\p{L}\p{N}](?:[\p{L}\p{N}-]*[\p{L}\p{N}])?)+`
const ADDRESS = new RegExp(`(${LOCAL})@(${DOMAIN})`, "gu")

/** `jane.doe@example.com` → `j***@example.com`; text without an `@` is masked whole. */
export const maskEmail = (email: string): string => {
  const at = email.lastIndexOf("@")
  if (at < 0) return "***"
  return `${Array.from(email.slice(0, at))[0] ?? ""}***${email.slice(at)}`
}

/** Every address in `text`, masked. */
export const maskEmails = (text: string): string =>
  text.includes("@") ? text.replace(ADDRESS, (_match, local: string, domain: string) => maskEmail(`${local}@${domain}`)) : text
