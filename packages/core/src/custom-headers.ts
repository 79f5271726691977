/**
 * A subscription's extra request headers (docs/api.md#custom-headers): up to 20, names are RFC 9110
 * tokens, values printable ASCII, 4 KiB in all (names and values). Headers that the service sets
 * itself, or that govern the connection and the message's framing, are refused: a customer header
 * must never change how the request is signed, framed or routed.
 */
export const MAX_CUSTOM_HEADERS = 20;
export const MAX_CUSTOM_HEADERS_BYTES = 4096;

/** Refused names, compared in lower case; `webhook-` is refused as a prefix. */
const RESERVED_HEADERS: ReadonlySet<string> = new Set([
  "content-type",
  "content-length",
  "host",
  "user-agent",
  "connection",
  "transfer-encoding",
  // The other hop-by-hop and framing headers: undici refuses to send some of them, and the rest
  // would change how the request travels rather than what it says.
  "keep-alive",
  "upgrade",
  "expect",
  "te",
  "trailer",
  "proxy-connection",
  // Meant for the egress proxy (EGRESS_PROXY_URL), which would take a customer's for its own.
  "proxy-authorization",
]);
const RESERVED_PREFIX = "webhook-";

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Visible ASCII, with spaces inside but not at either end (receivers would trim them). */
const PRINTABLE_VALUE = /^(?:[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?)?$/;

export function isReservedHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return RESERVED_HEADERS.has(lower) || lower.startsWith(RESERVED_PREFIX);
}

export interface HeaderProblem {
  /** The header the problem is with, as the client spelled it; absent for the set as a whole. */
  header?: string;
  message: string;
}

/** The first problem with a set of custom headers, or undefined when they are acceptable. */
export function customHeadersProblem(headers: Record<string, unknown>): HeaderProblem | undefined {
  const names = Object.keys(headers);
  if (names.length > MAX_CUSTOM_HEADERS) return { message: `headers must hold at most ${MAX_CUSTOM_HEADERS} headers` };
  const seen = new Set<string>();
  let bytes = 0;
  for (const name of names) {
    const value = headers[name];
    if (!TOKEN.test(name))
      return { header: name, message: "is not a valid header name (letters, digits and !#$%&'*+-.^_`|~ only)" };
    // A token, but JSON.parse's own key `__proto__` becomes the prototype wherever the object is
    // copied key by key on its way to PostgreSQL, and the header would vanish: refused, not lost.
    if (name === "__proto__") return { header: name, message: "cannot be used as a header name" };
    if (isReservedHeader(name))
      return {
        header: name,
        message: `cannot be set: the service sets ${name.toLowerCase()} itself or it governs the connection`,
      };
    if (seen.has(name.toLowerCase()))
      return { header: name, message: "is given twice (header names are case-insensitive)" };
    seen.add(name.toLowerCase());
    if (typeof value !== "string") return { header: name, message: "must be a string" };
    if (!PRINTABLE_VALUE.test(value))
      return { header: name, message: "must be printable ASCII, without spaces at either end" };
    bytes += name.length + value.length;
  }
  if (bytes > MAX_CUSTOM_HEADERS_BYTES)
    return { message: `headers must be at most ${MAX_CUSTOM_HEADERS_BYTES} bytes in all (names and values)` };
  return undefined;
}

/**
 * The headers of one request: the custom ones first, then those the service sets, which win. A
 * stored header that is reserved (refused on input, so only possible if written around the API)
 * is dropped rather than sent beside the service's own.
 */
export function mergeRequestHeaders(
  custom: Record<string, string>,
  own: Record<string, string>,
): Record<string, string> {
  const merged: Record<string, string> = {};
  const ownNames = new Set(Object.keys(own).map((name) => name.toLowerCase()));
  for (const [name, value] of Object.entries(custom)) {
    if (!isReservedHeader(name) && !ownNames.has(name.toLowerCase())) merged[name] = value;
  }
  return { ...merged, ...own };
}
