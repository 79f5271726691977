import { readFileSync } from "node:fs";
import ipaddr from "ipaddr.js";

/**
 * Where deliveries may go (docs/api.md#webhook-urls-and-egress-safety). In production a webhook URL
 * is untrusted input: without these checks anyone who can create a subscription could make our
 * workers call the cloud metadata service or an internal admin port. Development and tests deliver
 * to loopback receivers, so both checks can be switched off by configuration.
 */
export interface DestinationPolicy {
  /** Accept `http://` URLs as well as `https://`. */
  allowHttp: boolean;
  /** Accept loopback, private, link-local and other non-public addresses. */
  allowPrivateNetworks: boolean;
}

/**
 * Public addresses that are still internal: Azure's wireserver/metadata endpoint sits in public
 * space. (AWS, GCP and Alibaba metadata addresses fall in the link-local, ULA and CGNAT ranges.)
 */
const deniedPublicAddresses = new Set(["168.63.129.16"]);

/**
 * Whether an IP address is a public unicast address. Everything ipaddr.js does not classify as
 * plain `unicast` is refused: loopback, private, link-local, CGNAT, unspecified, broadcast,
 * multicast, reserved and documentation ranges, IPv6 ULA, and every IPv6 form that embeds an
 * IPv4 address (IPv4-mapped, NAT64, 6to4, Teredo), which could otherwise smuggle 127.0.0.1 through.
 */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  const parsed = ipaddr.parse(address);
  if (parsed.range() !== "unicast") return false;
  // The deprecated IPv4-compatible form (::a.b.c.d, e.g. ::7f00:1) counts as unicast to
  // ipaddr.js, but it embeds an IPv4 address just like the mapped form.
  if (
    parsed.kind() === "ipv6" &&
    parsed
      .toByteArray()
      .slice(0, 12)
      .every((byte) => byte === 0)
  )
    return false;
  return !deniedPublicAddresses.has(parsed.toString());
}

/** The host of a URL without IPv6 brackets, or undefined when the host is not an IP literal. */
export function ipLiteralHost(url: URL): string | undefined {
  const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
  return ipaddr.isValid(host) ? host : undefined;
}

export type UrlVerdict = { ok: true; url: URL } | { ok: false; reason: string };

/**
 * What a subscription's url says that parsing would quietly change. The url is
 * stored as sent and shown back, so it must mean what it reads as; WHATWG parsing (undici's, and
 * every browser's) would drop spaces and control characters, read a backslash as a slash
 * (`https://example.com\@evil.com` goes to example.com), accept `https:example.com`, read an
 * `@` after a `#` as part of a fragment that is never sent (`https://a.example:4201#@b.example`
 * goes to a.example), drop a port's leading zeros, and undici sends no `user:password@` it finds
 * there. `url` is the text as parsed (checkDestinationUrl's).
 * Checked when a subscription is saved, not when an attempt is sent, so that urls saved before
 * still deliver as they did.
 */
export function urlSpellingProblem(text: string, url: URL): string | undefined {
  if (/[\s\p{Cc}]/u.test(text)) return "must not contain spaces or control characters";
  if (text.includes("\\")) return "must not contain a backslash (it would be read as a slash)";
  if (!/^https?:\/\//i.test(text)) return "must start with https:// (or http:// where the deployment allows it)";
  // The authority as written: parsing drops an empty `@`, and takes a port's leading zeros.
  const authority = /^https?:\/\/([^/?#]*)/i.exec(text)?.[1] ?? "";
  if (url.username !== "" || url.password !== "" || authority.includes("@")) {
    return "must not contain credentials (user:password@); send them in the subscription's headers, such as Authorization";
  }
  const fragment = text.indexOf("#");
  if (fragment >= 0 && text.includes("@", fragment)) {
    return "must not have an @ in its fragment (it would read as the host, which it is not)";
  }
  const port = /:(\d*)$/.exec(authority.replace(/^\[[^\]]*\]/, ""))?.[1] ?? "";
  if (port === "0") return "must not use port 0";
  if (/^0\d/.test(port)) return "must write its port without leading zeros";
  return undefined;
}

/**
 * What DNS cannot look up (RFC 1035 §2.3.4): a name over 253 characters, or with a label (the
 * text between dots) empty or over 63. Parsing takes such names, and the lookup then fails on
 * every attempt, so they are refused up front. Measured on the parsed name, which spells an
 * internationalized one as DNS sees it (`xn--...`).
 */
function hostNameProblem(url: URL): string | undefined {
  if (ipLiteralHost(url) !== undefined) return undefined;
  // A fully qualified name may end in a dot, which counts neither as a label nor in the length.
  const host = url.hostname.endsWith(".") ? url.hostname.slice(0, -1) : url.hostname;
  if (host.length > 253 || host.split(".").some((label) => label.length === 0 || label.length > 63)) {
    return "must have a host name of at most 253 characters, each part between dots 1 to 63 characters long";
  }
  return undefined;
}

/** Names that mean this host, whatever DNS says (RFC 6761 §6.3, and the usual /etc/hosts aliases). */
const LOCAL_HOST_NAMES = new Set(["localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"]);

/** The names an /etc/hosts text maps to a loopback or other non-public address, lower-cased. */
export function hostsFileLocalNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const line of text.split("\n")) {
    const [address, ...aliases] = (line.split("#")[0] ?? "").trim().split(/\s+/);
    if (address === undefined || address === "" || !ipaddr.isValid(address) || isPublicAddress(address)) continue;
    for (const alias of aliases) names.add(alias.toLowerCase().replace(/\.$/, ""));
  }
  return names;
}

let hostsFileNames: Set<string> | undefined;

/** hostsFileLocalNames of this machine's /etc/hosts, read once; none when it cannot be read. */
function localNamesOfHostsFile(): Set<string> {
  if (!hostsFileNames) {
    try {
      hostsFileNames = hostsFileLocalNames(readFileSync("/etc/hosts", "utf8"));
    } catch {
      hostsFileNames = new Set();
    }
  }
  return hostsFileNames;
}

/** Whether a host name (lower-case, as parsed) means the local host. */
function isLocalHostName(hostname: string): boolean {
  // A fully qualified name may end in a dot: `localhost.` is localhost too.
  const host = hostname.endsWith(".") ? hostname.slice(0, -1) : hostname;
  return LOCAL_HOST_NAMES.has(host) || host.endsWith(".localhost") || localNamesOfHostsFile().has(host);
}

/**
 * Checks what can be checked from the URL alone. Host names are checked again on the resolved
 * address when the worker connects, because DNS can change between now and then.
 */
const HTTPS_ONLY = "must start with https://";
const HTTP_OR_HTTPS = "must start with https:// or http://";

export function checkDestinationUrl(text: string, policy: DestinationPolicy): UrlVerdict {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { ok: false, reason: "must be an absolute URL" };
  }
  // The message says what this deployment takes: https only (production's default), or either.
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    return { ok: false, reason: policy.allowHttp ? HTTP_OR_HTTPS : HTTPS_ONLY };
  }
  if (url.protocol === "http:" && !policy.allowHttp) {
    return { ok: false, reason: `${HTTPS_ONLY} (this deployment does not accept plain http://)` };
  }
  const hostProblem = hostNameProblem(url);
  if (hostProblem) return { ok: false, reason: hostProblem };
  if (!policy.allowPrivateNetworks) {
    const literal = ipLiteralHost(url);
    if (literal !== undefined && !isPublicAddress(literal)) {
      return { ok: false, reason: "must not point to a private, loopback or link-local address" };
    }
    if (isLocalHostName(url.hostname)) {
      return { ok: false, reason: "must not point to a private, loopback or link-local address" };
    }
  }
  return { ok: true, url };
}
