/**
 * When a failed attempt is tried again (docs/api.md#retry-schedule). The schedule lists the wait
 * before each retry: with the default seven steps a delivery gets eight attempts in all.
 */
export const DEFAULT_RETRY_SCHEDULE = "5s,5m,30m,2h,5h,10h,10h";

/** ±20% so that many deliveries failing together do not all come back at the same instant. */
const JITTER = 0.2;

export type RetryDecision = { retry: true; delayMs: number } | { retry: false; reason: "exhausted" | "gone" };

export interface FailedAttempt {
  /** 1 for the first attempt of the delivery. */
  attemptNumber: number;
  /** The response status, or null when no response arrived (timeout, network error). */
  responseCode: number | null;
  /** The value of the response's Retry-After header, if any. */
  retryAfter?: string | null;
}

/**
 * Decides whether and when to try again after a failed attempt.
 * - 410 Gone ends retries: the receiver says the endpoint is not coming back.
 * - after the last step of the schedule the delivery fails for good.
 * - on 429 and 503 a Retry-After is honoured: we never come back sooner than it asks, but never
 *   later than the longest step of the schedule, so a receiver cannot park a delivery forever.
 */
export function decideRetry(
  attempt: FailedAttempt,
  scheduleMs: readonly number[],
  now: Date = new Date(),
  random: () => number = Math.random,
): RetryDecision {
  if (attempt.responseCode === 410) return { retry: false, reason: "gone" };
  const step = scheduleMs[attempt.attemptNumber - 1];
  if (step === undefined) return { retry: false, reason: "exhausted" };

  let delayMs = Math.round(step * (1 - JITTER + 2 * JITTER * random()));
  if (attempt.responseCode === 429 || attempt.responseCode === 503) {
    const askedMs = parseRetryAfter(attempt.retryAfter, now);
    if (askedMs !== undefined) {
      const longestStep = Math.max(...scheduleMs);
      delayMs = Math.min(Math.max(delayMs, askedMs), Math.max(longestStep, delayMs));
    }
  }
  return { retry: true, delayMs };
}

/** The three date formats of RFC 9110 §5.6.7: IMF-fixdate, RFC 850 and asctime. */
const httpDate =
  /^(?:[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT|[A-Z][a-z]+, \d{2}-[A-Z][a-z]{2}-\d{2} \d{2}:\d{2}:\d{2} GMT|[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4})$/;

/** Retry-After is either delay-seconds or an HTTP date (RFC 9110 §10.2.3); anything else is ignored. */
export function parseRetryAfter(value: string | null | undefined, now: Date): number | undefined {
  if (!value) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // Date.parse alone is lenient: it reads "1.5" or "Retry in 5" as dates in 2001.
  if (!httpDate.test(text)) return undefined;
  // asctime carries no zone; like the other two forms it is GMT (Date.parse would read local time).
  const at = Date.parse(text.endsWith(" GMT") ? text : `${text} GMT`);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now.getTime());
}
