import { describe, expect, it } from "vitest";
import {
  applyAttempt,
  changesHealth,
  type EndpointHealth,
  explicitProbeAt,
  HEALTHY,
  type HealthChange,
  healthState,
  heldUntil,
  reenable,
} from "../src/endpoint-health.ts";

const rules = {
  maxRetryAfterMs: 60_000,
  circuitFailureThreshold: 3,
  circuitProbeIntervalMs: 10_000,
  autoDisableAfterMs: 3_600_000,
};
const now = new Date("2026-11-23T12:00:00.000Z");
const at = (ms: number) => new Date(now.getTime() + ms);
const health = (changes: Partial<EndpointHealth>): EndpointHealth => ({ ...HEALTHY, ...changes });

/** [name, before, attempt (response code, Retry-After), after, operational changes]. */
const cases: [string, EndpointHealth, number | null, string | undefined, Partial<EndpointHealth>, HealthChange[]][] = [
  ["a success keeps a healthy endpoint healthy", HEALTHY, 200, undefined, { lastSuccessAt: now }, []],
  [
    "a 5xx starts a failing streak",
    HEALTHY,
    500,
    undefined,
    { consecutiveFailures: 1, failingSince: now, lastFailureAt: now },
    [],
  ],
  [
    "a timeout counts like a 5xx",
    HEALTHY,
    null,
    undefined,
    { consecutiveFailures: 1, failingSince: now, lastFailureAt: now },
    [],
  ],
  [
    "a 4xx fails without counting toward the circuit",
    health({ consecutiveFailures: 2, failingSince: at(-5_000) }),
    404,
    undefined,
    { consecutiveFailures: 2, failingSince: at(-5_000), lastFailureAt: now },
    [],
  ],
  [
    "the threshold-th circuit failure opens the circuit until the next probe",
    health({ consecutiveFailures: 2, failingSince: at(-5_000) }),
    502,
    undefined,
    {
      consecutiveFailures: 3,
      failingSince: at(-5_000),
      lastFailureAt: now,
      circuitOpenedAt: now,
      heldUntil: at(10_000),
    },
    ["circuit_opened"],
  ],
  [
    "a failed probe keeps it open for another interval",
    health({ consecutiveFailures: 3, failingSince: at(-60_000), circuitOpenedAt: at(-10_000), heldUntil: at(0) }),
    null,
    undefined,
    {
      consecutiveFailures: 4,
      failingSince: at(-60_000),
      lastFailureAt: now,
      circuitOpenedAt: at(-10_000),
      heldUntil: at(10_000),
    },
    [],
  ],
  [
    "a successful probe closes it",
    health({ consecutiveFailures: 4, failingSince: at(-60_000), circuitOpenedAt: at(-10_000), heldUntil: at(0) }),
    200,
    undefined,
    { consecutiveFailures: 0, failingSince: null, lastSuccessAt: now, circuitOpenedAt: null, heldUntil: null },
    ["circuit_closed"],
  ],
  [
    "a probe refused with a 4xx keeps the circuit open, the next probe an interval away",
    health({ consecutiveFailures: 4, failingSince: at(-60_000), circuitOpenedAt: at(-10_000), heldUntil: at(0) }),
    400,
    undefined,
    {
      consecutiveFailures: 4,
      failingSince: at(-60_000),
      lastFailureAt: now,
      circuitOpenedAt: at(-10_000),
      heldUntil: at(10_000),
    },
    [],
  ],
  [
    "429 with Retry-After holds the subscription",
    HEALTHY,
    429,
    "30",
    { failingSince: now, lastFailureAt: now, heldUntil: at(30_000), retryAfterUntil: at(30_000) },
    [],
  ],
  [
    "a success of another attempt keeps a Retry-After hold that is still ahead",
    health({ failingSince: at(-1_000), lastFailureAt: at(-1_000), heldUntil: at(29_000) }),
    200,
    undefined,
    { failingSince: null, lastFailureAt: at(-1_000), lastSuccessAt: now, heldUntil: at(29_000) },
    [],
  ],
  [
    "a success after a Retry-After hold ended clears it",
    health({ failingSince: at(-31_000), lastFailureAt: at(-31_000), heldUntil: at(-1_000) }),
    200,
    undefined,
    { failingSince: null, lastFailureAt: at(-31_000), lastSuccessAt: now, heldUntil: null },
    [],
  ],
  [
    "503 with Retry-After holds it, capped by MAX_RETRY_AFTER",
    HEALTHY,
    503,
    "86400",
    {
      consecutiveFailures: 1,
      failingSince: now,
      lastFailureAt: now,
      heldUntil: at(60_000),
      retryAfterUntil: at(60_000),
    },
    [],
  ],
  ["429 without Retry-After does not hold", HEALTHY, 429, undefined, { failingSince: now, lastFailureAt: now }, []],
  [
    "410 disables at once",
    HEALTHY,
    410,
    undefined,
    { failingSince: now, lastFailureAt: now, active: false, disabledReason: "gone" },
    ["disabled"],
  ],
  [
    "failing for AUTO_DISABLE_AFTER without a success disables",
    health({ consecutiveFailures: 1, failingSince: at(-3_600_000) }),
    500,
    undefined,
    {
      consecutiveFailures: 2,
      failingSince: at(-3_600_000),
      lastFailureAt: now,
      active: false,
      disabledReason: "failing",
    },
    ["disabled"],
  ],
  [
    "a disabled subscription is not disabled twice",
    health({ failingSince: at(-7_200_000), active: false, disabledReason: "failing" }),
    410,
    undefined,
    { failingSince: at(-7_200_000), lastFailureAt: now, active: false, disabledReason: "failing" },
    [],
  ],
];

describe("endpoint health", () => {
  it.each(cases)("%s", (_name, before, responseCode, retryAfter, after, changes) => {
    expect(applyAttempt(before, { responseCode, retryAfter: retryAfter ?? null }, now, rules)).toEqual({
      health: { ...before, ...after },
      changes,
    });
  });

  it.each<[string, EndpointHealth, ReturnType<typeof healthState>, Date | null]>([
    ["healthy", HEALTHY, "healthy", null],
    ["failing", health({ failingSince: at(-1_000), consecutiveFailures: 1 }), "failing", null],
    [
      "circuit open, probe due later",
      health({ circuitOpenedAt: at(-1_000), heldUntil: at(9_000) }),
      "circuit_open",
      at(9_000),
    ],
    [
      "circuit open, probe due now",
      health({ circuitOpenedAt: at(-10_000), heldUntil: at(-1) }),
      "circuit_open",
      at(-1),
    ],
    ["held by Retry-After", health({ heldUntil: at(5_000) }), "circuit_open", at(5_000)],
    ["a Retry-After hold that ended", health({ heldUntil: at(-5_000) }), "healthy", null],
  ])("shows %s as %s, retry_at %s", (_name, current, state, retryAt) => {
    expect(healthState(current, now)).toBe(state);
    expect(heldUntil(current, now)).toEqual(retryAt);
  });

  it("re-enabling clears the reason, the circuit and the failing streak", () => {
    const disabled = health({
      active: false,
      disabledReason: "failing",
      consecutiveFailures: 9,
      failingSince: at(-1),
      circuitOpenedAt: at(-1),
      heldUntil: at(1),
      lastFailureAt: at(-1),
    });
    expect(reenable(disabled)).toEqual({ ...HEALTHY, lastFailureAt: at(-1) });
  });

  it.each<[string, EndpointHealth, number | null, boolean]>([
    ["a failure", HEALTHY, 500, true],
    ["the first success", HEALTHY, 200, true],
    ["a success right after another", health({ lastSuccessAt: at(-200) }), 200, false],
    ["a success a second after the last", health({ lastSuccessAt: at(-1_000) }), 200, true],
    ["a success while failing", health({ lastSuccessAt: at(-10), failingSince: at(-5) }), 200, true],
    ["a success after a Retry-After hold", health({ lastSuccessAt: at(-10), heldUntil: at(-5) }), 200, true],
  ])("writes health after %s: %s", (_name, current, responseCode, writes) => {
    expect(changesHealth(current, { responseCode }, now)).toBe(writes);
  });

  it.each<[string, EndpointHealth, Date | null]>([
    ["a closed circuit: nothing to bring forward", health({ heldUntil: at(5_000), retryAfterUntil: at(5_000) }), null],
    ["an open circuit: now", health({ circuitOpenedAt: at(-1_000), heldUntil: at(9_000) }), now],
    [
      "an open circuit whose endpoint asked for a Retry-After: at its end",
      health({ circuitOpenedAt: at(-1_000), heldUntil: at(9_000), retryAfterUntil: at(3_000) }),
      at(3_000),
    ],
    [
      "an open circuit whose Retry-After is over: now",
      health({ circuitOpenedAt: at(-1_000), heldUntil: at(9_000), retryAfterUntil: at(-1) }),
      now,
    ],
  ])("an explicit action probes %s", (_name, current, probeAt) => {
    expect(explicitProbeAt(current, now)).toEqual(probeAt);
  });

  it("remembers a Retry-After apart from the circuit's hold, which it may end before", () => {
    const open = health({ circuitOpenedAt: at(-1_000), consecutiveFailures: 3, heldUntil: at(9_000) });
    const { health: after } = applyAttempt(open, { responseCode: 503, retryAfter: "2" }, now, rules);
    expect(after).toMatchObject({ heldUntil: at(10_000), retryAfterUntil: at(2_000) });
  });
});
