import type { IsolationConfig } from "./config.ts";
import { type AttemptResult, isSuccess } from "./delivery-lifecycle.ts";
import { parseRetryAfter } from "./retry-schedule.ts";

/**
 * A subscription's health (docs/api.md#endpoint-health): the circuit breaker, Retry-After holds,
 * explicit probes and auto-disable, as pure rules. The worker applies each finished attempt with `applyAttempt` and
 * stores the result; `healthState` derives what the API shows.
 *
 * Why per subscription and not per origin: a subscription is what its owner configures, pauses
 * and sees the health of, and two subscriptions on one host can fail differently (one path
 * returns 500, another 200). What one bad host can take from everyone is bounded separately, by
 * ORIGIN_MAX_IN_FLIGHT.
 */
export interface EndpointHealth {
  /** Timeouts, connection errors and 5xx in a row (the circuit breaker's failures). */
  consecutiveFailures: number;
  /** The first failed attempt since the last success, or null. */
  failingSince: Date | null;
  lastSuccessAt: Date | null;
  lastFailureAt: Date | null;
  /** When the circuit opened; null while closed. */
  circuitOpenedAt: Date | null;
  /** Attempts wait until then: the next probe of an open circuit, or the end of a Retry-After. */
  heldUntil: Date | null;
  /** The end of the last Retry-After the endpoint asked for (heldUntil may be later: the next probe). */
  retryAfterUntil: Date | null;
  disabledReason: DisabledReason | null;
  active: boolean;
}

export type DisabledReason = "failing" | "gone";
export type HealthState = "healthy" | "failing" | "circuit_open";

/** Operational events (docs/api.md#operational-events), published when the health changes this way. */
export type HealthChange = "circuit_opened" | "circuit_closed" | "disabled";

export type HealthRules = Pick<
  IsolationConfig,
  "maxRetryAfterMs" | "circuitFailureThreshold" | "circuitProbeIntervalMs" | "autoDisableAfterMs"
>;

export const HEALTHY: EndpointHealth = {
  consecutiveFailures: 0,
  failingSince: null,
  lastSuccessAt: null,
  lastFailureAt: null,
  circuitOpenedAt: null,
  heldUntil: null,
  retryAfterUntil: null,
  disabledReason: null,
  active: true,
};

/** A failure that says the endpoint itself is unwell, as opposed to refusing this one request. */
export function isCircuitFailure(result: AttemptResult): boolean {
  return result.responseCode === null || result.responseCode >= 500;
}

/**
 * The health after one finished attempt, and what changed that an operator should hear of.
 * Attempts finish out of order across workers; each is applied as it is recorded.
 */
export function applyAttempt(
  health: EndpointHealth,
  result: AttemptResult,
  now: Date,
  rules: HealthRules,
): { health: EndpointHealth; changes: HealthChange[] } {
  const changes: HealthChange[] = [];
  if (isSuccess(result)) {
    const circuitWasOpen = health.circuitOpenedAt !== null;
    if (circuitWasOpen) changes.push("circuit_closed");
    // A success closes the circuit and ends the wait for its next probe, but not a Retry-After
    // the receiver sent (it holds the whole subscription until then): with several
    // attempts in flight, one of them often succeeds just after another was told to back off.
    const retryAfterHold =
      !circuitWasOpen && health.heldUntil !== null && health.heldUntil > now ? health.heldUntil : null;
    return {
      health: {
        ...health,
        consecutiveFailures: 0,
        failingSince: null,
        lastSuccessAt: now,
        circuitOpenedAt: null,
        heldUntil: retryAfterHold,
      },
      changes,
    };
  }

  const next: EndpointHealth = { ...health, lastFailureAt: now, failingSince: health.failingSince ?? now };
  if (isCircuitFailure(result)) {
    next.consecutiveFailures = health.consecutiveFailures + 1;
    if (next.consecutiveFailures >= rules.circuitFailureThreshold) {
      // Opens, or stays open after a failed probe: the next probe is one interval away.
      if (health.circuitOpenedAt === null) {
        next.circuitOpenedAt = now;
        changes.push("circuit_opened");
      }
      next.heldUntil = later(next.heldUntil, new Date(now.getTime() + rules.circuitProbeIntervalMs));
    }
  } else if (health.circuitOpenedAt !== null) {
    // A probe refused (a 4xx, a 3xx) closes nothing and opens nothing: the circuit stays open,
    // and the next probe is one interval away, as after a failed one. Left in the past, the hold
    // would tell the gate that nothing holds the subscription, and it would wake the whole line.
    next.heldUntil = later(next.heldUntil, new Date(now.getTime() + rules.circuitProbeIntervalMs));
  }
  // Back-pressure: a 429 or 503 with Retry-After holds the whole subscription until then.
  if (result.responseCode === 429 || result.responseCode === 503) {
    const askedMs = parseRetryAfter(result.retryAfter, now);
    if (askedMs !== undefined && askedMs > 0) {
      const end = new Date(now.getTime() + Math.min(askedMs, rules.maxRetryAfterMs));
      next.retryAfterUntil = later(next.retryAfterUntil, end);
      next.heldUntil = later(next.heldUntil, end);
    }
  }
  if (health.active && health.disabledReason === null) {
    const gone = result.responseCode === 410;
    const failingTooLong =
      next.failingSince !== null && now.getTime() - next.failingSince.getTime() >= rules.autoDisableAfterMs;
    if (gone || failingTooLong) {
      next.active = false;
      next.disabledReason = gone ? "gone" : "failing";
      changes.push("disabled");
    }
  }
  return { health: next, changes };
}

/**
 * Whether an attempt changes the stored health. A success on a healthy endpoint changes only
 * last_success_at, which is refreshed at most once a second so that a busy healthy subscription
 * does not cost a write per delivery.
 */
export function changesHealth(health: EndpointHealth, result: AttemptResult, now: Date): boolean {
  if (!isSuccess(result)) return true;
  if (
    health.consecutiveFailures > 0 ||
    health.failingSince !== null ||
    health.circuitOpenedAt !== null ||
    health.heldUntil !== null
  )
    return true;
  return health.lastSuccessAt === null || now.getTime() - health.lastSuccessAt.getTime() >= LAST_SUCCESS_PRECISION_MS;
}

const LAST_SUCCESS_PRECISION_MS = 1_000;

/**
 * PUT active:true after a disable: clears the reason, closes the circuit and lifts a Retry-After
 * (docs/api.md#auto-disable). The failing streak starts afresh too, or the first failure after it
 * would disable it again.
 */
export function reenable(health: EndpointHealth): EndpointHealth {
  return {
    ...health,
    active: true,
    disabledReason: null,
    circuitOpenedAt: null,
    heldUntil: null,
    retryAfterUntil: null,
    consecutiveFailures: 0,
    failingSince: null,
  };
}

/**
 * When an explicit action (a manual resend, a recover, a test event) may probe a subscription
 * whose circuit is open: now, since its owner says the endpoint may be back, rather than an
 * interval after the last failure; but never before the end of a Retry-After the endpoint asked
 * for. The probe is one attempt like any other: a success closes the circuit, a failure keeps it
 * open and counts once. Null while the circuit is closed.
 */
export function explicitProbeAt(health: EndpointHealth, now: Date): Date | null {
  if (health.circuitOpenedAt === null) return null;
  return health.retryAfterUntil !== null && health.retryAfterUntil > now ? health.retryAfterUntil : now;
}

/** What the API shows as `health.state`. */
export function healthState(health: EndpointHealth, now: Date): HealthState {
  if (health.circuitOpenedAt !== null || (health.heldUntil !== null && health.heldUntil > now)) return "circuit_open";
  if (health.failingSince !== null) return "failing";
  return "healthy";
}

/** When attempts may start again, or null when nothing holds them (the API's `retry_at`). */
export function heldUntil(health: Pick<EndpointHealth, "circuitOpenedAt" | "heldUntil">, now: Date): Date | null {
  if (health.heldUntil !== null && (health.heldUntil > now || health.circuitOpenedAt !== null)) return health.heldUntil;
  return null;
}

function later(a: Date | null, b: Date): Date {
  return a !== null && a > b ? a : b;
}
