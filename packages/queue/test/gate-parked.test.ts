import { describe, expect, it } from "vitest";
import { DeliveryGate, type GateInput } from "../src/index.ts";
import { gateInput } from "./gate-input.ts";
import { gateTestRedis } from "./gate-redis.ts";

/**
 * Deliveries that wait in line a long time (behind an open circuit, or a disabled subscription)
 * must cost nothing while they wait: no claim that is only taken back. A parked job's fallback
 * timer fires whatever happens (after 15 minutes, then every hour), and the reconciler nudges
 * every line each pass.
 *
 * Real Redis, the gate alone, with explicit clocks: `now` is passed to every call.
 */
const { redis, newPrefix } = gateTestRedis();

function newGate(): { gate: DeliveryGate; prefix: string } {
  const prefix = newPrefix();
  return { gate: new DeliveryGate(redis, prefix), prefix };
}

/** The nudge's waker, for tests that read what the nudge woke from its result. */
const wakeNothing = async () => {};

/** A delivery of the one subscription these tests use, one attempt in flight at most. */
function attempt(deliveryId: string, overrides: Partial<GateInput> = {}): GateInput {
  return gateInput(deliveryId, { subscriptionId: "sub_parked", maxInFlight: 1, ...overrides });
}

describe("a parked delivery whose fallback timer fires while it is still in line", () => {
  it("stays parked without a claim unless it is the head of a line nobody holds a turn of", async () => {
    const { gate } = newGate();
    const now = Date.now();
    expect(await gate.acquire(attempt("d1"), now)).toMatchObject({ go: true });
    expect(await gate.acquire(attempt("d2"), now)).toMatchObject({ go: false, reason: "max_in_flight" });
    for (const id of ["d3", "d4"])
      expect(await gate.acquire(attempt(id), now)).toMatchObject({ go: false, reason: "in_line" });

    // d3 and d4 are behind d2: they stay, and the line is as it was.
    expect(await gate.precheck("sub_parked", "d3", now + 1)).toBe("stays");
    expect(await gate.precheck("sub_parked", "d4", now + 1)).toBe("stays");
    expect(await gate.lineLength("sub_parked")).toBe(3);

    // d2 is the head, and nobody holds a turn: it goes on to the claim, where acquire decides.
    expect(await gate.precheck("sub_parked", "d2", now + 2)).toBe("go");

    // d1 ends: the turn is d2's. While it is pending, the new head d3 still stays.
    expect(await gate.release(attempt("d1"), now + 3)).toEqual([{ deliveryId: "d2", at: now + 3 }]);
    expect(await gate.precheck("sub_parked", "d3", now + 4)).toBe("stays");
    // d2, whose turn it is, goes on.
    expect(await gate.precheck("sub_parked", "d2", now + 4)).toBe("go");
    expect(await gate.acquire(attempt("d2", { waited: true }), now + 5)).toMatchObject({ go: true });
  });
});

describe("the head of a line whose fallback timer fires while the subscription is still full", () => {
  it("keeps its place at the head", async () => {
    const { gate } = newGate();
    const now = Date.now();
    expect(await gate.acquire(attempt("d1"), now)).toMatchObject({ go: true });
    expect(await gate.acquire(attempt("d2"), now)).toMatchObject({ go: false, reason: "max_in_flight" });
    expect(await gate.acquire(attempt("d3"), now)).toMatchObject({ go: false, reason: "in_line" });
    // d2 is the head, nobody holds a turn: it goes on to the claim, and finds d1 still under way.
    expect(await gate.precheck("sub_parked", "d2", now + 2)).toBe("go");
    expect(await gate.acquire(attempt("d2", { waited: true }), now + 3)).toMatchObject({
      go: false,
      reason: "max_in_flight",
    });
    // Before, it went to the back, behind d3, which began to wait after it.
    expect(await gate.release({ ...attempt("d1"), holdUntil: null }, now + 4)).toEqual([
      { deliveryId: "d2", at: now + 4 },
    ]);
  });
});

describe("the line of a subscription found disabled", () => {
  it("is left alone by the nudge and the pre-check until the subscription is resumed", async () => {
    const { gate, prefix } = newGate();
    const now = Date.now();
    expect(await gate.acquire(attempt("d1"), now)).toMatchObject({ go: true });
    expect(await gate.acquire(attempt("d2"), now)).toMatchObject({ go: false, reason: "max_in_flight" });
    // d1's attempt got a 410: the subscription is disabled. Its release wakes d2, whose claim finds it so.
    expect(await gate.release({ ...attempt("d1"), holdUntil: null }, now + 1)).toEqual([
      { deliveryId: "d2", at: now + 1 },
    ]);
    expect(await gate.acquire(attempt("d2", { disabled: true, waited: true }), now + 2)).toEqual({
      go: false,
      reason: "disabled",
      wakes: [],
    });
    // The mark lapses by itself within DISABLED_RECHECK_MS (5 minutes), should nobody resume it.
    const ttl = await redis.pttl(`${prefix}:gate:disabled:sub_parked`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(5 * 60_000);

    // Nothing is in flight and nobody holds a turn, but the nudge wakes nobody: d2 would only be
    // claimed and taken back. Nor does the head's own fallback timer take it to a claim.
    expect(await gate.nudgeAll(wakeNothing, now + 10_000)).toEqual([]);
    expect(await gate.precheck("sub_parked", "d2", now + 10_001)).toBe("stays");
    // A delivery of the subscription that comes due meanwhile (a retry) joins the line unclaimed.
    expect(await gate.precheck("sub_parked", "d3", now + 10_002)).toBe("joined");
    expect(await gate.lineLength("sub_parked")).toBe(2);

    // Enabled again (PUT active: true): the head is woken at once, and the line is nudged as usual again.
    expect(await gate.resume("sub_parked", now + 20_000)).toEqual([{ deliveryId: "d2", at: now + 20_000 }]);
    expect(await redis.exists(`${prefix}:gate:disabled:sub_parked`)).toBe(0);
    expect(await gate.acquire(attempt("d2", { waited: true }), now + 20_001)).toMatchObject({ go: true, wakes: [] });
    expect(await gate.release({ ...attempt("d2"), holdUntil: null }, now + 20_002)).toEqual([
      { deliveryId: "d3", at: now + 20_002 },
    ]);
  });

  it("is moved again by a claim that finds the subscription enabled, should the resume have been missed", async () => {
    const { gate, prefix } = newGate();
    const now = Date.now();
    expect(await gate.acquire(attempt("d1", { disabled: true }), now)).toMatchObject({ go: false, reason: "disabled" });
    expect(await gate.nudgeAll(wakeNothing, now + 10_000)).toEqual([]);
    // The API enabled it but could not reach Redis. A newcomer (a test event) is claimed, finds it
    // enabled, and waits behind d1: the mark goes, and the next nudge wakes d1.
    expect(await gate.acquire(attempt("d2"), now + 10_001)).toMatchObject({ go: false, reason: "in_line" });
    expect(await redis.exists(`${prefix}:gate:disabled:sub_parked`)).toBe(0);
    expect(await gate.nudgeAll(wakeNothing, now + 10_002)).toEqual([{ deliveryId: "d1", at: now + 10_002 }]);
  });
});

/**
 * d1 goes, d2 waits behind it; d1 ends at now + 1 and gives d2 the turn, and the worker that
 * should wake d2's job dies before it does.
 */
async function turnNobodyTakesUp(): Promise<{ gate: DeliveryGate; now: number }> {
  const { gate } = newGate();
  const now = Date.now();
  expect(await gate.acquire(attempt("d1"), now)).toMatchObject({ go: true });
  expect(await gate.acquire(attempt("d2"), now)).toMatchObject({ go: false, reason: "max_in_flight" });
  expect(await gate.release({ ...attempt("d1"), holdUntil: null }, now + 1)).toEqual([
    { deliveryId: "d2", at: now + 1 },
  ]);
  return { gate, now };
}

describe("a turn whose wake was lost", () => {
  it("lapses, and the reconciler's nudge wakes its delivery once", async () => {
    const { gate, now } = await turnNobodyTakesUp();

    // Not yet lapsed: the turn is still d2's to take.
    expect(await gate.nudgeAll(wakeNothing, now + 5_000)).toEqual([]);
    // Over 10 s later it has lapsed: the nudge wakes d2 (nothing else would, but its job's
    // fallback timer), once.
    expect(await gate.nudgeAll(wakeNothing, now + 10_100)).toEqual([{ deliveryId: "d2", at: now + 10_100 }]);
    expect(await gate.nudgeAll(wakeNothing, now + 10_200)).toEqual([]);
    // When d2's job comes, it goes like any delivery: nobody waits, there is room.
    expect(await gate.precheck("sub_parked", "d2", now + 10_300)).toBe("go");
    expect(await gate.acquire(attempt("d2", { waited: true }), now + 10_300)).toMatchObject({ go: true });
  });

  it("lapses too when another call of the subscription finds it first", async () => {
    const { gate, now } = await turnNobodyTakesUp();
    // A newcomer comes after the turn lapsed: it goes (the lapsed turn no longer takes room), and
    // d2 is not forgotten: the next nudge wakes it.
    expect(await gate.acquire(attempt("d3"), now + 10_100)).toMatchObject({ go: true });
    expect(await gate.nudgeAll(wakeNothing, now + 10_200)).toEqual([{ deliveryId: "d2", at: now + 10_200 }]);
  });

  it("is woken again by the next nudge if the nudge's own wake fails", async () => {
    const { gate, now } = await turnNobodyTakesUp();

    // The reconciler's wake fails (Redis refused the call): d2 is not forgotten.
    const failing = async () => {
      throw new Error("Redis refused the wake");
    };
    await expect(gate.nudgeAll(failing, now + 10_100)).rejects.toThrow("Redis refused the wake");
    const woken: string[] = [];
    const wakes = await gate.nudgeAll(
      async (batch) => void woken.push(...batch.map((wake) => wake.deliveryId)),
      now + 20_000,
    );
    expect(wakes).toEqual([{ deliveryId: "d2", at: now + 20_000 }]);
    expect(woken).toEqual(["d2"]);
    // Woken now: the pass after wakes nobody.
    expect(await gate.nudgeAll(wakeNothing, now + 30_000)).toEqual([]);
  });
});
