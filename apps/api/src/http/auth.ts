import { timingSafeEqual } from "node:crypto";
import {
  findLiveApiKey,
  findPortalSession,
  hashApiKey,
  PORTAL_TOKEN_FORMAT,
  type PrismaClient,
  tenantScope,
  UNSCOPED,
} from "@webhooks/db";
import type { Context, MiddlewareHandler } from "hono";
import { ApiError } from "./api-error.ts";
import { type AuthFailureThrottle, clientAddress, tooManyFailedAuthentications } from "./auth-throttle.ts";
import type { ApiEnv, Authentication, Authenticator, Principal } from "./types.ts";

/**
 * How long a stored key or a portal session stays trusted without asking PostgreSQL again: a
 * revoked key, and every portal session it created, is refused at most this long after.
 */
const STORED_KEY_CACHE_MS = 5_000;
/**
 * How long a well-formed key that PostgreSQL did not know is refused without asking again. Keys
 * are random, so one cannot come to exist after it was refused; revoked keys stay revoked.
 */
const UNKNOWN_KEY_CACHE_MS = 60_000;
const CACHE_LIMIT = 10_000;
/** The shape of the keys `npm run keys -- create` makes (createApiKey): anything else is not stored. */
const STORED_KEY_FORMAT = /^whk_[A-Za-z0-9_-]{43}$/;

const STATIC_KEY: Principal = Object.freeze({ keyId: "static", kind: "api_key", scope: UNSCOPED });
const INVALID: Authentication = Object.freeze({ ok: false, reason: "invalid" });
const EXPIRED: Authentication = Object.freeze({ ok: false, reason: "expired" });

/**
 * Checks bearer credentials: API keys (docs/api.md#authentication), static ones from API_KEYS
 * (unscoped) and keys created with the CLI and stored as hashes (unscoped, or scoped to a tenant),
 * and portal session tokens (docs/api.md#portal-sessions, scoped to their tenant until they
 * expire). Every comparison of a secret is between SHA-256 hashes, in constant time or by an index
 * lookup of the hash.
 *
 * Stored keys and sessions are cached the same way: a known one for a few seconds (which bounds
 * how late a revocation takes effect: of a key, and of the sessions that key created, which
 * findPortalSession no longer finds once it is revoked), an unknown one for a minute (credentials
 * are random, so one cannot come to exist after it was refused; a revoked key and its sessions
 * stay refused). A session's expiry is checked against the clock on every request, cached or not.
 */
export class CredentialAuthenticator implements Authenticator {
  readonly #staticKeys: Buffer[];
  readonly #cache = new Map<
    string,
    { principal: Principal; sessionExpiresAt: number | undefined; cachedUntil: number }
  >();
  readonly #unknown = new Map<string, number>();

  /** `now` is the cache's clock; tests move it instead of waiting for entries to expire. */
  constructor(
    private readonly db: PrismaClient,
    staticKeys: string[],
    private readonly now: () => number = Date.now,
  ) {
    this.#staticKeys = staticKeys.map(hashApiKey);
  }

  async authenticate(credential: string): Promise<Authentication> {
    const hash = hashApiKey(credential);
    // Compare with every static key, so the time taken does not tell which one was close.
    let staticMatch = false;
    for (const candidate of this.#staticKeys) staticMatch = timingSafeEqual(candidate, hash) || staticMatch;
    if (staticMatch) return { ok: true, principal: STATIC_KEY };

    // A wrong credential costs no query when it cannot be a stored one, or was refused a moment ago.
    const isKey = STORED_KEY_FORMAT.test(credential);
    if (!isKey && !PORTAL_TOKEN_FORMAT.test(credential)) return INVALID;
    const now = this.now();
    const cacheKey = hash.toString("hex");
    const cached = this.#cache.get(cacheKey);
    if (cached && cached.cachedUntil > now) return this.#checkExpiry(cached.principal, cached.sessionExpiresAt, now);
    if ((this.#unknown.get(cacheKey) ?? 0) > now) return INVALID;

    const found = isKey ? await this.#findKey(credential) : await this.#findSession(credential);
    if (found === undefined) {
      this.#cache.delete(cacheKey);
      if (this.#unknown.size >= CACHE_LIMIT) this.#unknown.clear();
      this.#unknown.set(cacheKey, now + UNKNOWN_KEY_CACHE_MS);
      return INVALID;
    }
    if (this.#cache.size >= CACHE_LIMIT) this.#cache.clear();
    this.#cache.set(cacheKey, { ...found, cachedUntil: now + STORED_KEY_CACHE_MS });
    return this.#checkExpiry(found.principal, found.sessionExpiresAt, now);
  }

  #checkExpiry(principal: Principal, sessionExpiresAt: number | undefined, now: number): Authentication {
    return sessionExpiresAt !== undefined && sessionExpiresAt <= now ? EXPIRED : { ok: true, principal };
  }

  async #findKey(key: string): Promise<{ principal: Principal; sessionExpiresAt: undefined } | undefined> {
    const found = await findLiveApiKey({ db: this.db }, key);
    if (found === undefined) return undefined;
    const scope = found.tenantId === null ? UNSCOPED : tenantScope(found.tenantId);
    return { principal: { keyId: found.id, kind: "api_key", scope }, sessionExpiresAt: undefined };
  }

  async #findSession(token: string): Promise<{ principal: Principal; sessionExpiresAt: number } | undefined> {
    const session = await findPortalSession({ db: this.db }, token);
    if (session === undefined) return undefined;
    return {
      principal: { keyId: session.id, kind: "portal_session", scope: tenantScope(session.tenantId) },
      sessionExpiresAt: session.expiresAt.getTime(),
    };
  }
}

function bearerToken(header: string | undefined): string | undefined {
  return header === undefined ? undefined : /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1];
}

/**
 * Why an Authorization header holds no bearer key, in words that show how to send one. It never
 * repeats what was sent: that may be a key.
 */
function missingKeyMessage(header: string | undefined): string {
  const howTo = "Send the API key as `Authorization: Bearer <key>`.";
  if (header === undefined || header.trim() === "") return `No API key provided. ${howTo}`;
  const [first, ...rest] = header.trim().split(/\s+/);
  if (/^bearer$/i.test(first ?? "")) {
    return rest.length === 0
      ? `The Authorization header says Bearer but gives no key after it. ${howTo}`
      : `The Authorization header must hold one key after Bearer. ${howTo}`;
  }
  if (rest.length === 0) return `The Authorization header is missing the word Bearer before the key. ${howTo}`;
  // Named only when it is a well-known scheme: anything else might be a key.
  const scheme = WELL_KNOWN_SCHEMES.find((known) => known.toLowerCase() === first?.toLowerCase());
  return `The Authorization header uses ${scheme ? `the ${scheme} scheme` : "another scheme than Bearer"}. ${howTo}`;
}

const WELL_KNOWN_SCHEMES = ["Basic", "Digest", "Token", "Negotiate", "NTLM", "ApiKey"];

/** A failed authentication: a 401, or a 429 once the address is over the throttle's limit. */
function authenticationFailed(c: Context, throttle: AuthFailureThrottle, error: ApiError): ApiError {
  const retryAfter = throttle.recordFailure(clientAddress(c));
  return retryAfter > 0 ? tooManyFailedAuthentications(retryAfter) : error;
}

/**
 * A valid key is always let through, even from an address over the failure limit: keys carry 256
 * bits, so answering it reveals nothing guessable, and clients sharing an address (behind a proxy
 * or NAT) with a misbehaving one keep working. Wrong keys from that address get 429.
 *
 * Every answer it guards is marked `cache-control: no-store`, errors included.
 */
export function requireApiKey(authenticator: Authenticator, throttle: AuthFailureThrottle): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    // Authenticated answers hold secrets shown once (a subscription's signing secret, a portal
    // token) and tenants' data: no browser or proxy cache may keep them. Set first, so that the
    // refusals below and every later error carry it too; it costs one header on the hot path.
    c.header("cache-control", "no-store");
    const header = c.req.header("authorization");
    const key = bearerToken(header);
    if (!key) {
      throw authenticationFailed(
        c,
        throttle,
        new ApiError(401, "authentication_error", "api_key_missing", missingKeyMessage(header)),
      );
    }
    const authentication = await authenticator.authenticate(key);
    if (!authentication.ok) {
      const refusal =
        authentication.reason === "expired"
          ? new ApiError(
              401,
              "authentication_error",
              "portal_session_expired",
              "The portal session has expired. Ask for a new portal link.",
            )
          : new ApiError(
              401,
              "authentication_error",
              "api_key_invalid",
              "The API key is not valid, or has been revoked.",
            );
      throw authenticationFailed(c, throttle, refusal);
    }
    c.set("apiKeyId", authentication.principal.keyId);
    c.set("principal", authentication.principal);
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
        new ApiError(
          401,
          "authentication_error",
          "metrics_token_invalid",
          "The metrics need `Authorization: Bearer <METRICS_TOKEN>`.",
          undefined,
          {
            "www-authenticate": 'Bearer realm="metrics"',
          },
        ),
      );
    }
    await next();
  };
}
