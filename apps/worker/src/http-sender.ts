import { StringDecoder } from "node:string_decoder";
import { checkDestinationUrl, type DestinationPolicy, type Logger } from "@webhooks/core";
import { Agent, type Dispatcher, request } from "undici";
import { createSafeLookup, DestinationNotAllowedError, type Resolver } from "./safe-lookup.ts";

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
  durationMs: number;
}

export interface SenderOptions {
  timeoutMs: number;
  policy: DestinationPolicy;
  userAgent: string;
  /** Tests replace DNS; production uses the system resolver. */
  resolve?: Resolver;
  /** Where a refused destination's resolved addresses are logged (the worker's); tests may leave it out. */
  logger?: Logger;
}

/**
 * Sends webhooks with undici through one keep-alive connection pool per origin (much cheaper
 * per request than the global fetch). Redirects are not followed: a 3xx is a failed attempt.
 */
export class HttpSender {
  readonly #agent: Agent;

  constructor(private readonly options: SenderOptions) {
    this.#agent = new Agent({
      keepAliveTimeout: 30_000,
      connect: {
        timeout: Math.min(options.timeoutMs, 10_000),
        ...(options.policy.allowPrivateNetworks ? {} : { lookup: createSafeLookup(options.resolve) }),
      },
    });
  }

  async send(url: string, headers: Record<string, string>, body: string): Promise<SendResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const refusal = this.#refuse(url);
    if (refusal) return { responseCode: null, responseBody: null, retryAfter: null, error: refusal, durationMs: 0 };

    let response: Dispatcher.ResponseData;
    try {
      response = await request(url, {
        method: "POST",
        dispatcher: this.#agent,
        headers: { "content-type": "application/json", "user-agent": this.options.userAgent, ...headers },
        body,
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
    } catch (error) {
      const refusal = lookupRefusal(error);
      if (refusal) {
        // The operator's copy of the refusal, with what the attempt's error leaves out; the event
        // id (webhook-id) ties the line to the attempt.
        this.options.logger?.warn(
          { eventId: headers["webhook-id"], host: refusal.host, addresses: refusal.addresses },
          "destination refused: its name resolves to no public address",
        );
      }
      return {
        responseCode: null,
        responseBody: null,
        retryAfter: null,
        error: describeError(error, this.options.timeoutMs),
        durationMs: elapsed(),
      };
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
    await this.#agent.close();
  }
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

function describeError(error: unknown, timeoutMs: number): string {
  const err = error as { name?: string; code?: string; message?: string; cause?: unknown };
  if (err.name === "TimeoutError" || err.name === "AbortError") return `timeout after ${timeoutMs} ms`;
  if (err.code === "DESTINATION_NOT_ALLOWED") return err.message ?? "destination not allowed";
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
