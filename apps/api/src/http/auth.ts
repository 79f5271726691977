import { timingSafeEqual } from "node:crypto";
import { findLiveApiKey, hashApiKey, type PrismaClient } from "@webhooks/db";
import type { Context, MiddlewareHandler } from "hono";
import { ApiError } from "./api-error.ts";
import { type AuthFailureThrottle, clientAddress, tooManyFailedAuthentications } from "./auth-throttle.ts";
import type { ApiEnv, Authenticator } from "./types.ts";

/** How long a stored key stays trusted without asking PostgreSQL again; bounds revocation delay. */
const STORED_KEY_CACHE_MS = 5_000;
/**
 * How long a well-formed key that PostgreSQL did not know is refused without asking again. Keys
 * are random, so one cannot come to exist after it was refused; revoked keys stay revoked.
 */
const UNKNOWN_KEY_CACHE_MS = 60_000;
const CACHE_LIMIT = 10_000;
/** The shape of the keys `npm run keys -- create` makes (createApiKey): anything else is not stored. */
const STORED_KEY_FORMAT = /^whk_[A-Za-z0-9_-]{43}$/;

/**
 * Checks API keys (contract §3): static keys from API_KEYS, and keys created with the CLI and
 * stored as hashes. Every comparison is between SHA-256 hashes in constant time.
 */
export class ApiKeyAuthenticator implements Authenticator {
  readonly #staticKeys: Buffer[];
  readonly #cache = new Map<string, { keyId: string; expiresAt: number }>();
  readonly #unknown = new Map<string, number>();

  /** `now` is the cache's clock; tests move it instead of waiting for entries to expire. */
  constructor(
    private readonly db: PrismaClient,
    staticKeys: string[],
    private readonly now: () => number = Date.now,
  ) {
    this.#staticKeys = staticKeys.map(hashApiKey);
  }

  /** The id of the key (`static` for API_KEYS), or undefined when the key is not valid. */
  async authenticate(key: string): Promise<string | undefined> {
    const hash = hashApiKey(key);
    // Compare with every static key, so the time taken does not tell which one was close.
    let staticMatch = false;
    for (const candidate of this.#staticKeys) staticMatch = timingSafeEqual(candidate, hash) || staticMatch;
    if (staticMatch) return "static";

    // A wrong key costs no query when it cannot be a stored key, or was refused a moment ago.
    if (!STORED_KEY_FORMAT.test(key)) return undefined;
    const cacheKey = hash.toString("hex");
    const cached = this.#cache.get(cacheKey);
    if (cached && cached.expiresAt > this.now()) return cached.keyId;
    if ((this.#unknown.get(cacheKey) ?? 0) > this.now()) return undefined;

    const keyId = await findLiveApiKey({ db: this.db }, key);
    if (keyId === undefined) {
      this.#cache.delete(cacheKey);
      if (this.#unknown.size >= CACHE_LIMIT) this.#unknown.clear();
      this.#unknown.set(cacheKey, this.now() + UNKNOWN_KEY_CACHE_MS);
      return undefined;
    }
    if (this.#cache.size >= CACHE_LIMIT) this.#cache.clear();
    this.#cache.set(cacheKey, { keyId, expiresAt: this.now() + STORED_KEY_CACHE_MS });
    return keyId;
  }
}

function bearerToken(header: string | undefined): string | undefined {
  return header === undefined ? undefined : /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1];
}

/** A failed authentication: a 401, or a 429 once the address is over the throttle's limit. */
function authenticationFailed(c: Context, throttle: AuthFailureThrottle, error: ApiError): ApiError {
  const retryAfter = throttle.recordFailure(clientAddress(c));
  return retryAfter > 0 ? tooManyFailedAuthentications(retryAfter) : error;
}

/**
 * A valid key is always let through, even from an address over the failure limit: keys carry 256
 * bits, so answering it reveals nothing guessable, and clients sharing an address (behind a proxy
 * or NAT) with a misbehaving one keep working. Wrong keys from that address get 429.
 */
export function requireApiKey(authenticator: Authenticator, throttle: AuthFailureThrottle): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    const key = bearerToken(c.req.header("authorization"));
    if (!key) {
      throw authenticationFailed(
        c,
        throttle,
        new ApiError(401, "authentication_error", "api_key_missing", "No API key provided. Send it as `Authorization: Bearer <key>`."),
      );
    }
    const keyId = await authenticator.authenticate(key);
    if (keyId === undefined) {
      throw authenticationFailed(c, throttle, new ApiError(401, "authentication_error", "api_key_invalid", "The API key is not valid, or has been revoked."));
    }
    c.set("apiKeyId", keyId);
    await next();
  };
}

/** `/metrics` behind `Authorization: Bearer <METRICS_TOKEN>`, when a token is configured. */
export function requireMetricsToken(token: string, throttle: AuthFailureThrottle): MiddlewareHandler<ApiEnv> {
  const expected = hashApiKey(token);
  return async (c, next) => {
    const presented = bearerToken(c.req.header("authorization"));
    if (presented === undefined || !timingSafeEqual(hashApiKey(presented), expected)) {
      throw authenticationFailed(
        c,
        throttle,
        new ApiError(401, "authentication_error", "metrics_token_invalid", "The metrics need `Authorization: Bearer <METRICS_TOKEN>`.", undefined, {
          "www-authenticate": 'Bearer realm="metrics"',
        }),
      );
    }
    await next();
  };
}
