import type { HttpBindings } from "@hono/node-server";
import type { Context } from "hono";
import { ApiError } from "./api-error.ts";

/** Failed authentications an address may make per window before it is answered 429. */
export const AUTH_FAILURE_LIMIT = 20;
export const AUTH_FAILURE_WINDOW_MS = 60_000;
/** Addresses tracked at once; past this, expired entries are dropped (and, failing that, all). */
const MAX_TRACKED_ADDRESSES = 10_000;

/**
 * Counts failed authentications (API keys, the metrics token, the Bull Board password) per client
 * address in fixed windows. In this process only, like the rate limiter: no network call on the
 * request path.
 */
export class AuthFailureThrottle {
  readonly #failures = new Map<string, { count: number; windowEndsAt: number }>();

  constructor(
    readonly limit = AUTH_FAILURE_LIMIT,
    readonly windowMs = AUTH_FAILURE_WINDOW_MS,
  ) {}

  /** Seconds until `address` may fail again without a 429; 0 while it is under the limit. */
  retryAfterSeconds(address: string): number {
    const entry = this.#failures.get(address);
    const now = Date.now();
    if (!entry || entry.windowEndsAt <= now || entry.count < this.limit) return 0;
    return Math.max(1, Math.ceil((entry.windowEndsAt - now) / 1000));
  }

  /** Records a failure; returns the seconds to announce in Retry-After once over the limit, else 0. */
  recordFailure(address: string): number {
    const now = Date.now();
    let entry = this.#failures.get(address);
    if (!entry || entry.windowEndsAt <= now) {
      if (this.#failures.size >= MAX_TRACKED_ADDRESSES) this.#prune(now);
      entry = { count: 0, windowEndsAt: now + this.windowMs };
      this.#failures.set(address, entry);
    }
    entry.count++;
    return entry.count > this.limit ? Math.max(1, Math.ceil((entry.windowEndsAt - now) / 1000)) : 0;
  }

  #prune(now: number) {
    for (const [address, entry] of this.#failures) if (entry.windowEndsAt <= now) this.#failures.delete(address);
    if (this.#failures.size >= MAX_TRACKED_ADDRESSES) this.#failures.clear();
  }
}

export function tooManyFailedAuthentications(retryAfterSeconds: number): ApiError {
  return new ApiError(429, "rate_limit_error", "too_many_failed_authentications", "Too many failed authentication attempts from this address; try again later", undefined, {
    "retry-after": String(retryAfterSeconds),
  });
}

/**
 * The address of the TCP peer. Forwarded-For headers are not trusted: any client can set them.
 * Behind a proxy this is the proxy's address (see the README).
 */
export function clientAddress(c: Context): string {
  return (c.env as Partial<HttpBindings> | undefined)?.incoming?.socket?.remoteAddress ?? "unknown";
}
