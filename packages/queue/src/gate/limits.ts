/**
 * The limits the gate holds a subscription's attempts to, computed in one place for the worker
 * (each attempt, from its claim) and the API (a PUT that changes them wakes the line by them).
 * docs/api.md#endpoint-limits states them for users.
 */
export interface GateLimits {
  subscriptionId: string;
  /** Scheme, host and port of the url the attempt goes to. */
  origin: string;
  maxInFlight: number;
  originMaxInFlight: number;
  /** Attempts per second at most, or null. */
  rateLimit: number | null;
}

/**
 * `url`: the delivery's own snapshot of it for an attempt, the subscription's current one for a
 * change of its limits.
 */
export function gateLimits(
  subscription: { id: string; url: string; maxInFlight: number; rateLimit: number | null },
  isolation: { originMaxInFlight: number },
): GateLimits {
  return {
    subscriptionId: subscription.id,
    origin: originOf(subscription.url),
    maxInFlight: subscription.maxInFlight,
    originMaxInFlight: isolation.originMaxInFlight,
    rateLimit: subscription.rateLimit,
  };
}

/** Origins of the urls seen lately: parsing a url is a noticeable part of an attempt's CPU. */
const origins = new Map<string, string>();
const ORIGINS_KEPT = 10_000;

/** Scheme, host and port: what one server is. An unparsable url is its own origin (its attempt fails fast). */
export function originOf(url: string): string {
  let origin = origins.get(url);
  if (origin === undefined) {
    origin = parseOrigin(url);
    // A cache, never a record: it forgets everything when full.
    if (origins.size >= ORIGINS_KEPT) origins.clear();
    origins.set(url, origin);
  }
  return origin;
}

function parseOrigin(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return url;
  }
}
