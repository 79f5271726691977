import type { HttpBindings } from "@hono/node-server";
import type { Context } from "hono";
import ipaddr from "ipaddr.js";
import { ApiError } from "./api-error.ts";

/** Failed authentications an address may make per window before it is answered 429. */
export const AUTH_FAILURE_LIMIT = 20;
export const AUTH_FAILURE_WINDOW_MS = 60_000;
/** Addresses tracked at once; past this, the entries whose windows began first are dropped. */
export const MAX_TRACKED_ADDRESSES = 10_000;

/**
 * Counts failed authentications (API keys, the metrics token, the Bull Board password) per client
 * address in fixed windows. In this process only, like the rate limiter: no network call on the
 * request path.
 *
 * An IPv6 address is counted by its /64: a single host is usually given a whole /64, so counting
 * its addresses one by one would give it billions of fresh counters.
 */
export class AuthFailureThrottle {
  readonly #failures = new Map<string, { count: number; windowEndsAt: number }>();

  constructor(
    readonly limit = AUTH_FAILURE_LIMIT,
    readonly windowMs = AUTH_FAILURE_WINDOW_MS,
  ) {}

  /** Seconds until `address` may fail again without a 429; 0 while it is under the limit. */
  retryAfterSeconds(address: string): number {
    const entry = this.#failures.get(throttledBlock(address));
    const now = Date.now();
    if (!entry || entry.windowEndsAt <= now || entry.count < this.limit) return 0;
    return Math.max(1, Math.ceil((entry.windowEndsAt - now) / 1000));
  }

  /** Records a failure; returns the seconds to announce in Retry-After once over the limit, else 0. */
  recordFailure(address: string): number {
    const now = Date.now();
    const block = throttledBlock(address);
    let entry = this.#failures.get(block);
    if (!entry || entry.windowEndsAt <= now) {
      // Deleted and set again, so that the map's order stays the order in which windows began.
      this.#failures.delete(block);
      this.#makeRoom();
      entry = { count: 0, windowEndsAt: now + this.windowMs };
      this.#failures.set(block, entry);
    }
    entry.count++;
    return entry.count > this.limit ? Math.max(1, Math.ceil((entry.windowEndsAt - now) / 1000)) : 0;
  }

  /**
   * Drops the oldest entries until there is room for one more. Windows all last as long, so the
   * oldest are the expired ones, and then those nearest their end. Clearing everything instead
   * would let a client that fails from many addresses reset every other address's count.
   */
  #makeRoom() {
    for (const block of this.#failures.keys()) {
      if (this.#failures.size < MAX_TRACKED_ADDRESSES) return;
      this.#failures.delete(block);
    }
  }
}

/**
 * What an address is counted under: an IPv4 address itself, also when it arrives IPv4-mapped
 * (`::ffff:1.2.3.4`, as a dual-stack socket reports IPv4 clients; counting those by their /64
 * would put every IPv4 client in one bucket), and an IPv6 address by its /64.
 */
export function throttledBlock(address: string): string {
  if (!ipaddr.isValid(address)) return address;
  const parsed = ipaddr.process(address);
  if (parsed.kind() === "ipv4") return parsed.toString();
  const network = (parsed as ipaddr.IPv6).parts.slice(0, 4).map((part) => part.toString(16));
  return `${network.join(":")}::/64`;
}

export function tooManyFailedAuthentications(retryAfterSeconds: number): ApiError {
  return new ApiError(
    429,
    "rate_limit_error",
    "too_many_failed_authentications",
    "Too many failed authentication attempts from this address; try again later",
    undefined,
    {
      "retry-after": String(retryAfterSeconds),
    },
  );
}

/**
 * The address of the TCP peer. Forwarded-For headers are not trusted: any client can set them.
 * Behind a proxy this is the proxy's address (docs/operations.md#authentication-throttling).
 */
export function clientAddress(c: Context): string {
  return (c.env as Partial<HttpBindings> | undefined)?.incoming?.socket?.remoteAddress ?? "unknown";
}
