import { timingSafeEqual } from "node:crypto";
import { findLiveApiKey, hashApiKey, type PrismaClient } from "@webhooks/db";
import type { MiddlewareHandler } from "hono";
import { ApiError } from "./api-error.ts";
import type { ApiEnv } from "./types.ts";

/** How long a stored key stays trusted without asking PostgreSQL again; bounds revocation delay. */
const STORED_KEY_CACHE_MS = 5_000;
const CACHE_LIMIT = 10_000;

/**
 * Checks API keys (contract §3): static keys from API_KEYS, and keys created with the CLI and
 * stored as hashes. Every comparison is between SHA-256 hashes in constant time.
 */
export class ApiKeyAuthenticator {
  readonly #staticKeys: Buffer[];
  readonly #cache = new Map<string, { keyId: string; expiresAt: number }>();

  constructor(
    private readonly db: PrismaClient,
    staticKeys: string[],
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

    const cacheKey = hash.toString("hex");
    const cached = this.#cache.get(cacheKey);
    if (cached && cached.expiresAt > Date.now()) return cached.keyId;

    const keyId = await findLiveApiKey({ db: this.db }, key);
    if (keyId === undefined) {
      this.#cache.delete(cacheKey);
      return undefined;
    }
    if (this.#cache.size >= CACHE_LIMIT) this.#cache.clear();
    this.#cache.set(cacheKey, { keyId, expiresAt: Date.now() + STORED_KEY_CACHE_MS });
    return keyId;
  }
}

export function requireApiKey(authenticator: ApiKeyAuthenticator): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    const header = c.req.header("authorization");
    const match = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match?.[1]) {
      throw new ApiError(401, "authentication_error", "api_key_missing", "No API key provided. Send it as `Authorization: Bearer <key>`.");
    }
    const keyId = await authenticator.authenticate(match[1]);
    if (keyId === undefined) {
      throw new ApiError(401, "authentication_error", "api_key_invalid", "The API key is not valid, or has been revoked.");
    }
    c.set("apiKeyId", keyId);
    await next();
  };
}
