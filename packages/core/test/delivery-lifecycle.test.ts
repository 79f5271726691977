import { describe, expect, it } from "vitest";
import {
  type DeliveryEvent,
  type DeliveryState,
  IllegalTransition,
  INITIAL_STATE,
  isSuccess,
  nextState,
  type StoredState,
  stateOf,
} from "../src/delivery-lifecycle.ts";

const rules = { retryScheduleMs: [5_000, 60_000], now: new Date("2026-11-23T12:00:00Z"), random: () => 0.5 };
const finished = (attemptNumber: number, responseCode: number | null, retryAfter?: string): DeliveryEvent => ({
  type: "attempt_finished",
  attemptNumber,
  result: { responseCode, retryAfter: retryAfter ?? null },
});
const resend: DeliveryEvent = { type: "resend" };

/** Every transition (docs/api.md#delivery-states), as [from, event, to]. */
const transitions: [DeliveryState, DeliveryEvent, StoredState][] = [
  // queued -> delivered | failed (retry scheduled) | failed (final)
  ["queued", finished(1, 200), { status: "delivered", nextAttemptInMs: null }],
  ["queued", finished(1, 204), { status: "delivered", nextAttemptInMs: null }],
  ["queued", finished(1, 500), { status: "failed", nextAttemptInMs: 5_000 }],
  ["queued", finished(1, null), { status: "failed", nextAttemptInMs: 5_000 }],
  ["queued", finished(1, 301), { status: "failed", nextAttemptInMs: 5_000 }],
  ["queued", finished(1, 429, "30"), { status: "failed", nextAttemptInMs: 30_000 }],
  ["queued", finished(1, 410), { status: "failed", nextAttemptInMs: null }],
  // a resent delivery starts the schedule where its attempts stand
  ["queued", finished(3, 500), { status: "failed", nextAttemptInMs: null }],
  // failed with a retry scheduled -> delivered | failed (again scheduled, or final)
  ["retry_scheduled", finished(2, 200), { status: "delivered", nextAttemptInMs: null }],
  ["retry_scheduled", finished(2, 503), { status: "failed", nextAttemptInMs: 60_000 }],
  ["retry_scheduled", finished(3, 503), { status: "failed", nextAttemptInMs: null }],
  ["retry_scheduled", finished(2, 410), { status: "failed", nextAttemptInMs: null }],
  // manual resend: from every state to queued, due now (a queued one is left as it is)
  ["delivered", resend, { status: "queued", nextAttemptInMs: 0 }],
  ["failed", resend, { status: "queued", nextAttemptInMs: 0 }],
  ["retry_scheduled", resend, { status: "queued", nextAttemptInMs: 0 }],
  ["queued", resend, { status: "queued", nextAttemptInMs: 0 }],
];

describe("the delivery state machine", () => {
  it.each(transitions)("%s --%o--> %o", (from, event, to) => {
    expect(nextState(from, event, rules)).toEqual(to);
  });

  it.each<[DeliveryState, DeliveryEvent]>([
    ["delivered", finished(2, 200)],
    ["failed", finished(9, 500)],
  ])("refuses an attempt from %s: nothing is due", (from, event) => {
    expect(() => nextState(from, event, rules)).toThrow(IllegalTransition);
  });

  it("starts queued and due at once", () => {
    expect(INITIAL_STATE).toEqual({ status: "queued", nextAttemptInMs: 0 });
  });

  it.each<[Parameters<typeof stateOf>[0], Date | null, DeliveryState]>([
    ["queued", new Date(), "queued"],
    ["delivered", null, "delivered"],
    ["failed", new Date(), "retry_scheduled"],
    ["failed", null, "failed"],
  ])("reads status %s with next_attempt_at %s as %s", (status, nextAttemptAt, state) => {
    expect(stateOf(status, nextAttemptAt)).toBe(state);
  });

  it.each<[number | null, boolean]>([
    [200, true],
    [299, true],
    [199, false],
    [300, false],
    [null, false],
  ])("counts %s as a success: %s", (responseCode, success) => {
    expect(isSuccess({ responseCode })).toBe(success);
  });
});
