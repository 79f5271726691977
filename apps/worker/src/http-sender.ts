import { StringDecoder } from "node:string_decoder";
import {
  checkDestinationUrl,
  type DestinationPolicy,
  type EndpointCredentials,
  type Logger,
  openCredentials,
  type SecretBox,
} from "@webhooks/core";
import type { Dispatcher } from "undici";
import { Egress, EgressProxyError } from "./egress.ts";
import { OAuth2TokenError, OAuth2Tokens } from "./oauth2-tokens.ts";
import { DestinationNotAllowedError, type Resolver } from "./safe-lookup.ts";

/** We read this much of a response at most, and keep this much of it in the attempt log. */
const MAX_RESPONSE_BYTES = 64 * 1024;
const EXCERPT_BYTES = 4 * 1024;

export interface SendResult {
  /** Null when no response arrived. */
  responseCode: number | null;
  responseBody: string | null;
  retryAfter: string | null;
  /** Why no response arrived, in a few words; with a response, why its body was cut short. */
  error: string | null;
  /** No response arrived before the attempt's time ran out: a timeout, apart from the other failures. */
  timedOut: boolean;
  durationMs: number;
}

export interface SenderOptions {
  timeoutMs: number;
  policy: DestinationPolicy;
  userAgent: string;
  /** Opens the deliveries' sealed endpoint credentials; without it, a delivery that has some fails its attempt. */
  secretBox?: SecretBox;
  /** EGRESS_PROXY_URL: every request goes through this proxy. */
  proxyUrl?: string | undefined;
  /** Tests replace DNS; production uses the system resolver. */
  resolve?: Resolver;
  /** Tests trust their own CA instead of the system's (see EgressOptions). */
  trustedCertificates?: string[];
  /** Where a refused destination's resolved addresses are logged (the worker's); tests may leave it out. */
  logger?: Logger;
}

/** A delivery's endpoint credentials as the claim read them: sealed, named by their row's id. */
export interface SealedCredentials {
  id: string;
  ciphertext: Uint8Array;
}

/** Opened credentials kept at most; a row never changes, so a kept one never goes stale. */
const MAX_OPENED_CREDENTIALS = 10_000;

/**
 * Sends webhooks with undici through one keep-alive connection pool per origin (much cheaper
 * per request than the global fetch), directly or through the egress proxy (see Egress).
 * Redirects are not followed: a 3xx is a failed attempt. A delivery's endpoint credentials add
 * its Authorization header (basic, or an OAuth2 token) and its client certificate
 * (docs/api.md#endpoint-authentication).
 */
export class HttpSender {
  readonly #egress: Egress;
  readonly #tokens: OAuth2Tokens;
  readonly #opened = new Map<string, EndpointCredentials>();

  constructor(private readonly options: SenderOptions) {
    this.#egress = new Egress({
      timeoutMs: options.timeoutMs,
      policy: options.policy,
      proxyUrl: options.proxyUrl,
      resolve: options.resolve,
      trustedCertificates: options.trustedCertificates,
    });
    this.#tokens = new OAuth2Tokens(this.#egress, {
      timeoutMs: options.timeoutMs,
      userAgent: options.userAgent,
      describeError: (error) => describeError(error, options.timeoutMs),
    });
  }

  async send(
    url: string,
    headers: Record<string, string>,
    body: string,
    credentials?: SealedCredentials | null,
  ): Promise<SendResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const failed = (error: string, cause?: unknown): SendResult => ({
      responseCode: null,
      responseBody: null,
      retryAfter: null,
      error,
      timedOut: cause !== undefined && isTimeout(cause),
      durationMs: elapsed(),
    });
    const refusal = this.#refuse(url);
    if (refusal) return { ...failed(refusal), durationMs: 0 };
    // One deadline for the whole attempt, a token request included: the delivery's lease is
    // sized for one timeout.
    const signal = AbortSignal.timeout(this.options.timeoutMs);

    let endpoint: EndpointCredentials | null = null;
    try {
      endpoint = credentials ? this.#open(credentials) : null;
    } catch {
      return failed("endpoint credentials could not be decrypted (check SECRET_ENCRYPTION_KEY)");
    }
    const requestHeaders: Record<string, string> = {
      "content-type": "application/json",
      "user-agent": this.options.userAgent,
      ...headers,
    };
    const auth = endpoint?.auth ?? null;
    let token: string | undefined;
    if (auth?.type === "basic") {
      setAuthorization(requestHeaders, `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString("base64")}`);
    } else if (auth?.type === "oauth2_client_credentials") {
      try {
        token = await this.#tokens.get(auth, signal);
      } catch (error) {
        this.#logRefusal(error, headers, "token endpoint");
        return failed(
          error instanceof OAuth2TokenError
            ? error.message
            : `OAuth2 token request failed: ${describeError(error, this.options.timeoutMs)}`,
          error,
        );
      }
      setAuthorization(requestHeaders, `Bearer ${token}`);
    }
    const certificate = endpoint?.client_certificate ?? null;

    let response: Dispatcher.ResponseData;
    try {
      response = await this.#egress.request(new URL(url), {
        method: "POST",
        headers: requestHeaders,
        body,
        signal,
        identity: certificate
          ? { certificate: certificate.certificate, privateKey: certificate.private_key }
          : undefined,
      });
    } catch (error) {
      this.#logRefusal(error, headers, "destination");
      return failed(describeError(error, this.options.timeoutMs), error);
    }
    // The receiver refused the token: the next attempt (on the retry schedule, like any failed
    // attempt) gets a new one. Not retried at once: every request a receiver may have seen is
    // an attempt of its own in the log.
    if (response.statusCode === 401 && token !== undefined && auth?.type === "oauth2_client_credentials") {
      this.#tokens.drop(auth, token);
    }
    // The status is the receiver's answer (success is a 2xx). A body that then fails
    // to arrive in full (the attempt's time runs out, the connection drops) only cuts the excerpt
    // short: counting the answer as no response would send a webhook the receiver accepted again.
    const excerpt = await readExcerpt(response.body);
    const retryAfter = response.headers["retry-after"];
    return {
      responseCode: response.statusCode,
      responseBody: excerpt.text,
      retryAfter: Array.isArray(retryAfter) ? (retryAfter[0] ?? null) : (retryAfter ?? null),
      error:
        excerpt.failure === undefined
          ? null
          : `response body incomplete: ${describeError(excerpt.failure, this.options.timeoutMs)}`,
      timedOut: false,
      durationMs: elapsed(),
    };
  }

  /**
   * What the URL alone tells (docs/api.md#webhook-urls-and-egress-safety), with the same rules as
   * the API's check when the subscription was saved: a scheme, an IP literal or a localhost name
   * never reach the DNS lookup, which checks every other name on the address it resolves to.
   */
  #refuse(url: string): string | undefined {
    const verdict = checkDestinationUrl(url, this.options.policy);
    return verdict.ok ? undefined : `destination not allowed: url ${verdict.reason}`;
  }

  async close(): Promise<void> {
    await this.#egress.close();
  }

  #open(credentials: SealedCredentials): EndpointCredentials {
    let opened = this.#opened.get(credentials.id);
    if (!opened) {
      if (!this.options.secretBox) throw new Error("no secret box to open endpoint credentials with");
      if (this.#opened.size >= MAX_OPENED_CREDENTIALS) this.#opened.clear();
      opened = openCredentials(this.options.secretBox, credentials.ciphertext);
      this.#opened.set(credentials.id, opened);
    }
    return opened;
  }

  /** The operator's copy of a refusal by the destination checks, with what the attempt's error leaves out. */
  #logRefusal(error: unknown, headers: Record<string, string>, what: "destination" | "token endpoint"): void {
    const refusal = lookupRefusal(error);
    if (!refusal) return;
    // The event id (webhook-id) ties the line to the attempt.
    this.options.logger?.warn(
      { eventId: headers["webhook-id"], host: refusal.host, addresses: refusal.addresses },
      `${what} refused: its name resolves to no public address`,
    );
  }
}

/** Sets Authorization, replacing one the headers had under any spelling. */
function setAuthorization(headers: Record<string, string>, value: string): void {
  for (const name of Object.keys(headers)) if (name.toLowerCase() === "authorization") delete headers[name];
  headers.authorization = value;
}

/** The first EXCERPT_BYTES of a response body, and why the rest did not arrive, if it failed. */
async function readExcerpt(
  body: AsyncIterable<Buffer> & { destroy(): void },
): Promise<{ text: string | null; failure?: unknown }> {
  const kept: Buffer[] = [];
  let keptBytes = 0;
  let readBytes = 0;
  let failure: unknown;
  try {
    for await (const chunk of body) {
      if (keptBytes < EXCERPT_BYTES) {
        const part = chunk.subarray(0, EXCERPT_BYTES - keptBytes);
        kept.push(part);
        keptBytes += part.length;
      }
      readBytes += chunk.length;
      if (readBytes >= MAX_RESPONSE_BYTES) {
        // Enough: drop the connection rather than read an unbounded body.
        body.destroy();
        break;
      }
    }
  } catch (error) {
    failure = error;
    body.destroy();
  }
  if (keptBytes === 0) return { text: null, failure };
  // The decoder holds back a character cut in half at the 4 KiB mark instead of mangling it;
  // PostgreSQL text cannot hold NUL, so NULs are dropped.
  return { text: new StringDecoder("utf8").write(Buffer.concat(kept)).replaceAll("\u0000", ""), failure };
}

/** The safe lookup's refusal, when that is what failed the request (undici may wrap it as a cause). */
function lookupRefusal(error: unknown): DestinationNotAllowedError | undefined {
  for (let cause = error; cause instanceof Error; cause = cause.cause)
    if (cause instanceof DestinationNotAllowedError) return cause;
  return undefined;
}

/** The attempt's time ran out (connecting, waiting for the answer, or fetching a token), as describeError words it. */
function isTimeout(error: unknown): boolean {
  const err = error as { name?: string; code?: string; cause?: unknown };
  if (err.name === "TimeoutError" || err.name === "AbortError") return true;
  if (err.code === "DESTINATION_NOT_ALLOWED" || error instanceof EgressProxyError) return false;
  if (err.cause) return isTimeout(err.cause);
  return ["UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT"].includes(err.code ?? "");
}

function describeError(error: unknown, timeoutMs: number): string {
  const err = error as { name?: string; code?: string; message?: string; cause?: unknown };
  if (err.name === "TimeoutError" || err.name === "AbortError") return `timeout after ${timeoutMs} ms`;
  if (err.code === "DESTINATION_NOT_ALLOWED") return err.message ?? "destination not allowed";
  // Said apart from the receiver's failures: the request never reached it.
  if (error instanceof EgressProxyError) return error.message;
  if (err.cause) return describeError(err.cause, timeoutMs);
  switch (err.code) {
    case "ECONNREFUSED":
      return "connection refused";
    case "ECONNRESET":
    case "UND_ERR_SOCKET":
      return "connection reset";
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return "DNS lookup failed";
    case "UND_ERR_CONNECT_TIMEOUT":
      return "connect timeout";
    case "UND_ERR_HEADERS_TIMEOUT":
    case "UND_ERR_BODY_TIMEOUT":
      return `timeout after ${timeoutMs} ms`;
    default:
      return (err.code ? `${err.code}: ` : "") + (err.message ?? "request failed").slice(0, 500);
  }
}
