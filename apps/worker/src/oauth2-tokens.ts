import { createHash } from "node:crypto";
import type { EndpointAuth } from "@webhooks/core";
import type { Egress } from "./egress.ts";

type OAuth2Auth = Extract<EndpointAuth, { type: "oauth2_client_credentials" }>;

/**
 * OAuth 2.0 access tokens got with the client-credentials grant (RFC 6749 §4.4,
 * docs/api.md#endpoint-authentication), shared by every attempt of the worker process:
 *
 * - one cache entry per credential (token url, client, secret, scope, audience), so attempts of
 *   every delivery and subscription with the same credential share its token;
 * - a token is used until shortly before its `expires_in` (a minute before, or halfway for
 *   tokens that live less than two minutes), then the next attempt fetches a new one;
 * - one token request at a time per credential: attempts that need the token meanwhile wait for
 *   that request;
 * - `drop` forgets a token the receiver refused (401), so the next attempt fetches a new one.
 */

/** Kept this long when the token endpoint does not say (`expires_in` is only RECOMMENDED). */
const DEFAULT_LIFETIME_MS = 5 * 60_000;
const MAX_REFRESH_MARGIN_MS = 60_000;
const MAX_ENTRIES = 10_000;
/** A token response is a small JSON document: anything longer is cut here and fails to parse. */
const MAX_TOKEN_RESPONSE_BYTES = 64 * 1024;

/** The token request failed: no token, and nothing was sent to the receiver. */
export class OAuth2TokenError extends Error {
  readonly code = "OAUTH2_TOKEN";
  constructor(reason: string, options?: { cause?: unknown }) {
    super(`OAuth2 token request failed: ${reason}`, options);
    this.name = "OAuth2TokenError";
  }
}

interface CachedToken {
  token: string;
  /** performance.now() after which the token is not used any more. */
  refreshAt: number;
}

export class OAuth2Tokens {
  readonly #cache = new Map<string, CachedToken>();
  readonly #fetching = new Map<string, Promise<CachedToken>>();

  constructor(
    private readonly egress: Egress,
    private readonly options: {
      timeoutMs: number;
      userAgent: string;
      /** Why a request failed, in the sender's words (timeouts, refused connections, the proxy). */
      describeError: (error: unknown) => string;
    },
  ) {}

  /** A token for `auth`: the cached one while it is fresh, else one fetched now (or being fetched). */
  async get(auth: OAuth2Auth, signal: AbortSignal): Promise<string> {
    const key = credentialKey(auth);
    const cached = this.#cache.get(key);
    if (cached && cached.refreshAt > performance.now()) return cached.token;
    let fetching = this.#fetching.get(key);
    if (!fetching) {
      fetching = this.#fetch(auth).finally(() => this.#fetching.delete(key));
      this.#fetching.set(key, fetching);
    }
    // The fetch runs on its own deadline, for every attempt waiting on it: this one stops waiting
    // when its own time runs out.
    const fetched = await raceAbort(fetching, signal);
    return fetched.token;
  }

  /** Forgets `token` if it is still the cached one (a newer token fetched meanwhile stays). */
  drop(auth: OAuth2Auth, token: string): void {
    const key = credentialKey(auth);
    if (this.#cache.get(key)?.token === token) this.#cache.delete(key);
  }

  async #fetch(auth: OAuth2Auth): Promise<CachedToken> {
    const requestedAt = performance.now();
    const form = new URLSearchParams({ grant_type: "client_credentials" });
    if (auth.scope !== undefined) form.set("scope", auth.scope);
    if (auth.audience !== undefined) form.set("audience", auth.audience);
    // client_secret_basic (RFC 6749 §2.3.1): id and secret form-encoded, then Basic.
    const basic = Buffer.from(`${formEncode(auth.client_id)}:${formEncode(auth.client_secret)}`).toString("base64");
    let status: number;
    let text: string;
    try {
      const response = await this.egress.request(new URL(auth.token_url), {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          accept: "application/json",
          "user-agent": this.options.userAgent,
          authorization: `Basic ${basic}`,
        },
        body: form.toString(),
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
      status = response.statusCode;
      text = await readText(response.body);
    } catch (error) {
      throw new OAuth2TokenError(this.options.describeError(error), { cause: error });
    }
    const json = parseJson(text);
    if (status < 200 || status >= 300) {
      // RFC 6749 §5.2: `error` is a code such as invalid_client; its description is left out,
      // as servers may echo what they were sent.
      const code = typeof json?.error === "string" && /^[\x20-\x7e]{1,64}$/.test(json.error) ? ` (${json.error})` : "";
      throw new OAuth2TokenError(`the token endpoint answered ${status}${code}`);
    }
    const token = json?.access_token;
    if (typeof token !== "string" || token === "" || !/^[\x21-\x7e]+$/.test(token)) {
      throw new OAuth2TokenError("the token endpoint's answer has no usable access_token");
    }
    const tokenType = json?.token_type;
    if (typeof tokenType === "string" && tokenType.toLowerCase() !== "bearer") {
      throw new OAuth2TokenError(`the token endpoint gave a ${tokenType.slice(0, 32)} token, not a Bearer token`);
    }
    const expiresIn = Number(json?.expires_in);
    const lifetimeMs = Number.isFinite(expiresIn) && expiresIn > 0 ? expiresIn * 1000 : DEFAULT_LIFETIME_MS;
    const cached = { token, refreshAt: requestedAt + lifetimeMs - Math.min(MAX_REFRESH_MARGIN_MS, lifetimeMs / 2) };
    if (this.#cache.size >= MAX_ENTRIES) this.#cache.clear();
    this.#cache.set(credentialKey(auth), cached);
    return cached;
  }
}

/** What a token belongs to: every field of the credential (a hash, so the secret is not a map key in the heap's plain sight). */
function credentialKey(auth: OAuth2Auth): string {
  return createHash("sha256")
    .update(JSON.stringify([auth.token_url, auth.client_id, auth.client_secret, auth.scope, auth.audience]))
    .digest("base64");
}

function formEncode(value: string): string {
  return encodeURIComponent(value).replaceAll("%20", "+");
}

async function readText(body: AsyncIterable<Buffer> & { destroy(): void }): Promise<string> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    length += chunk.length;
    if (length >= MAX_TOKEN_RESPONSE_BYTES) {
      body.destroy();
      break;
    }
  }
  return Buffer.concat(chunks).toString("utf8");
}

function parseJson(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === "object" ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}
