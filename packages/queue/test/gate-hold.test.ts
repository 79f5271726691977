import { describe, expect, it } from "vitest";
import { DeliveryGate, type GateInput } from "../src/index.ts";
import { gateInput } from "./gate-input.ts";
import { gateTestRedis } from "./gate-redis.ts";

/**
 * The gate while a subscription is held (an open circuit waiting for its next probe, or a
 * Retry-After): an attempt that ends must not wake the deliveries in line, since each would be
 * claimed only to be taken back; the head's turn is for the hold's end.
 *
 * Real Redis, the gate alone, with explicit clocks: `now` is passed to every call.
 */
const { redis, newPrefix } = gateTestRedis();

function newGate(): DeliveryGate {
  return newGateWithPrefix().gate;
}

function newGateWithPrefix(): { gate: DeliveryGate; prefix: string } {
  const prefix = newPrefix();
  return { gate: new DeliveryGate(redis, prefix), prefix };
}

/** A delivery of the one subscription these tests use, two attempts in flight at most. */
function attempt(deliveryId: string, overrides: Partial<GateInput> = {}): GateInput {
  return gateInput(deliveryId, { subscriptionId: "sub_held", maxInFlight: 2, ...overrides });
}

/** Two attempts under way (d1, d2) and three deliveries waiting in line for a slot (d3, d4, d5). */
async function fullWithLine(gate: DeliveryGate, now: number): Promise<void> {
  for (const id of ["d1", "d2"]) expect(await gate.acquire(attempt(id), now)).toMatchObject({ go: true });
  for (const id of ["d3", "d4", "d5"]) expect(await gate.acquire(attempt(id), now)).toMatchObject({ go: false });
  expect(await gate.lineLength("sub_held")).toBe(3);
}

describe("the gate while a subscription is held", () => {
  it("wakes nobody when an attempt's own health write holds it, and gives the head the turn for the hold's end", async () => {
    const gate = newGate();
    const now = Date.now();
    await fullWithLine(gate, now);

    // d1 failed and opened the circuit: the next probe is due in 5 s.
    const holdEnd = now + 5_000;
    expect(await gate.release({ ...attempt("d1"), holdUntil: holdEnd }, now + 10)).toEqual([
      { deliveryId: "d3", at: holdEnd },
    ]);
    // d2 ends too; its health write did not report (another attempt's did): the gate keeps to the hold.
    expect(await gate.release({ ...attempt("d2") }, now + 20)).toEqual([]);
    expect(await gate.lineLength("sub_held")).toBe(2);
    expect(await gate.turnOf("sub_held", "d3")).toBe(holdEnd);
  });

  it("sends turn holders that meet a hold on their way back to their places in the line, in their order", async () => {
    const { gate, prefix } = newGateWithPrefix();
    const now = Date.now();
    const three = (id: string, overrides: Partial<GateInput> = {}) => attempt(id, { maxInFlight: 3, ...overrides });
    for (const id of ["d1", "d2", "d3"]) expect(await gate.acquire(three(id), now)).toMatchObject({ go: true });
    for (const [i, id] of ["d4", "d5", "d6", "d7"].entries())
      expect(await gate.acquire(three(id), now + 1 + i)).toMatchObject({ go: false });
    // The three attempts end together: the first three of the line get the turns.
    const wakes = await Promise.all(["d1", "d2", "d3"].map((id) => gate.release(three(id), now + 10)));
    expect(wakes.flat().map((wake) => wake.deliveryId)).toEqual(["d4", "d5", "d6"]);

    // On their way, their claims read a hold (another attempt got a Retry-After): all three must
    // wait again, in one batch. Each going to the front of the line would reverse them.
    const holdEnd = now + 5_000;
    const decisions = await Promise.all(
      ["d4", "d5", "d6"].map((id) => gate.acquire(three(id, { waited: true, heldUntil: holdEnd }), now + 20)),
    );
    expect(decisions.map((decision) => decision.go)).toEqual([false, false, false]);
    // Back in their order, ahead of d7; the head, d4, has the turn for the hold's end.
    expect(await gate.turnOf("sub_held", "d4")).toBe(holdEnd);
    expect(await redis.zrange(`${prefix}:gate:line:sub_held`, "0", "-1")).toEqual(["d5", "d6", "d7"]);
    // Only the place of the turn pending is kept.
    expect(await redis.hkeys(`${prefix}:gate:place:sub_held`)).toEqual(["d4"]);
  });

  it("gives the turn for a hold's end at once when the subscription is resumed (PUT active: true lifted the hold)", async () => {
    const gate = newGate();
    const now = Date.now();
    await fullWithLine(gate, now);
    // d1 got a 429 with Retry-After: 3600: the head's turn is for an hour from now.
    const holdEnd = now + 3_600_000;
    expect(await gate.release({ ...attempt("d1"), holdUntil: holdEnd }, now + 10)).toEqual([
      { deliveryId: "d3", at: holdEnd },
    ]);
    // The owner enables it again, which lifts the hold in PostgreSQL: d3's turn is now, not in an hour.
    expect(await gate.resume("sub_held", now + 20)).toEqual([{ deliveryId: "d3", at: now + 20 }]);
    expect(await gate.turnOf("sub_held", "d3")).toBe(now + 20);
    expect(await gate.acquire(attempt("d3", { waited: true }), now + 21)).toMatchObject({ go: true });
  });

  it("wakes the line at once when an attempt's health write says nothing holds it any more", async () => {
    const gate = newGate();
    const now = Date.now();
    await fullWithLine(gate, now);
    const holdEnd = now + 5_000;
    await gate.release({ ...attempt("d1"), holdUntil: holdEnd }, now + 10);

    // d2 was the probe, and it succeeded: the circuit closed. d3's turn, for the hold's end, is
    // now, and one slot is free beside it.
    expect(await gate.release({ ...attempt("d2"), holdUntil: null }, now + 20)).toEqual([
      { deliveryId: "d3", at: now + 20 },
      { deliveryId: "d4", at: now + 20 },
    ]);
    expect(await gate.lineLength("sub_held")).toBe(1);
  });

  it("forgets the hold when an attempt's health write says nothing holds it, even with nobody in line", async () => {
    const { gate, prefix } = newGateWithPrefix();
    const now = Date.now();
    for (const id of ["d1", "d2"]) expect(await gate.acquire(attempt(id), now)).toMatchObject({ go: true });
    await gate.release({ ...attempt("d1"), holdUntil: now + 5_000 }, now + 10);
    expect(await redis.exists(`${prefix}:gate:hold:sub_held`)).toBe(1);
    // A hint left behind would make a newcomer wait in line behind any turn pending.
    expect(await gate.release({ ...attempt("d2"), holdUntil: null }, now + 20)).toEqual([]);
    expect(await redis.exists(`${prefix}:gate:hold:sub_held`)).toBe(0);
  });

  it("keeps the hold at most a lease long: a hint outliving a lifted hold only slows the line that long", async () => {
    const gate = newGate();
    const short = (id: string) => attempt(id, { leaseMs: 300 });
    const now = Date.now();
    for (const id of ["d1", "d2"]) expect(await gate.acquire(short(id), now)).toMatchObject({ go: true });
    for (const id of ["d3", "d4"]) expect(await gate.acquire(short(id), now)).toMatchObject({ go: false });
    const holdEnd = now + 5_000;
    expect(await gate.release({ ...short("d1"), holdUntil: holdEnd }, now + 10)).toEqual([
      { deliveryId: "d3", at: holdEnd },
    ]);

    // Past the lease, the gate has forgotten the hold: a slot freed wakes the line again.
    await new Promise((resolve) => setTimeout(resolve, 400));
    const later = Date.now();
    expect(await gate.release(short("d2"), later)).toEqual([{ deliveryId: "d4", at: later }]);
  });

  it("remembers a hold that a claim found, and forgets it when a fresh claim finds none", async () => {
    const gate = newGate();
    const now = Date.now();
    expect(await gate.acquire(attempt("d1"), now)).toMatchObject({ go: true });
    // Another worker opened the circuit meanwhile: d2's claim read it.
    const holdEnd = now + 5_000;
    const held = await gate.acquire(attempt("d2", { heldUntil: holdEnd, circuitOpen: true }), now + 10);
    expect(held).toEqual({ go: false, reason: "circuit_open", wakes: [{ deliveryId: "d2", at: holdEnd }] });
    expect(await gate.acquire(attempt("d3"), now + 20)).toMatchObject({ go: false, reason: "in_line" });

    // d1 ends without having written the health: d3 stays in line (without the hold, the free slot would wake it).
    expect(await gate.release(attempt("d1"), now + 30)).toEqual([]);
    expect(await gate.lineLength("sub_held")).toBe(1);

    // d2's turn comes and its claim finds the subscription no longer held (the probe time has
    // come, the circuit closed): it starts, and the line moves again.
    expect(await gate.acquire(attempt("d2"), holdEnd)).toEqual({
      go: true,
      probe: false,
      wakes: [{ deliveryId: "d3", at: holdEnd }],
    });
    expect(await gate.lineLength("sub_held")).toBe(0);
  });
});

describe("the gate's line while deliveries woken from it are on their way", () => {
  it("lets a newcomer go at once beside a pending turn when there is room for both, and not when there is not", async () => {
    const gate = newGate();
    const three = (id: string) => attempt(id, { maxInFlight: 3 });
    const now = Date.now();
    for (const id of ["d1", "d2", "d3"]) expect(await gate.acquire(three(id), now)).toMatchObject({ go: true });
    expect(await gate.acquire(three("d4"), now)).toMatchObject({ go: false, reason: "max_in_flight" });
    // d1 ends: d4 gets the turn, and is on its way; the line is empty.
    expect(await gate.release(three("d1"), now + 1)).toEqual([{ deliveryId: "d4", at: now + 1 }]);
    expect(await gate.lineLength("sub_held")).toBe(0);
    // d5 finds d2 and d3 under way and d4's turn: no room left for it.
    expect(await gate.acquire(three("d5"), now + 2)).toMatchObject({ go: false, reason: "max_in_flight" });
    // d2 ends: d5, now the head of the line, gets a turn beside d4's.
    expect(await gate.release(three("d2"), now + 3)).toEqual([{ deliveryId: "d5", at: now + 3 }]);
    // d4 takes its turn, and d3 ends.
    expect(await gate.acquire(three("d4"), now + 4)).toMatchObject({ go: true });
    expect(await gate.release(three("d3"), now + 5)).toEqual([]);
    // One turn pending (d5), one under way (d4): room for d6 beside them, so it goes without waiting in line.
    expect(await gate.acquire(three("d6"), now + 6)).toMatchObject({ go: true });
    expect(await gate.acquire(three("d5"), now + 7)).toMatchObject({ go: true });
    expect(await gate.lineLength("sub_held")).toBe(0);
  });
});

describe("the gate's rate window", () => {
  it("starts at most rate_limit attempts in any 1.1 s, and gives the next one a turn for when the window frees", async () => {
    const gate = newGate();
    const limited = (id: string) => attempt(id, { maxInFlight: 100, rateLimit: 5 });
    const now = Date.now();
    for (let i = 0; i < 5; i++) expect(await gate.acquire(limited(`d${i}`), now + i * 10)).toMatchObject({ go: true });
    // The sixth, within the window: it waits, with the turn for the moment the first start leaves it.
    expect(await gate.acquire(limited("d5"), now + 100)).toEqual({
      go: false,
      reason: "rate_limit",
      wakes: [{ deliveryId: "d5", at: now + 1_100 }],
    });
    // At that moment it goes, and a seventh waits for the second start to leave the window.
    expect(await gate.acquire(limited("d5"), now + 1_100)).toMatchObject({ go: true });
    expect(await gate.acquire(limited("d6"), now + 1_101)).toMatchObject({ go: false, reason: "rate_limit" });
  });

  it("paces the sends themselves: a sixth send within 1.1 s is told how long to wait", async () => {
    const gate = newGate();
    const now = Date.now();
    for (let i = 0; i < 5; i++) expect(await gate.pace("sub_paced", 5, `d${i}`, now + i * 10)).toBe(0);
    expect(await gate.pace("sub_paced", 5, "d5", now + 500)).toBe(600);
    expect(await gate.pace("sub_paced", 5, "d5", now + 1_100)).toBe(0);
  });
});

describe("the gate's line when the subscription's limits change (PUT max_in_flight or rate_limit)", () => {
  it("wakes as many as the new cap has room for at once, and the pre-check compares with the new cap", async () => {
    const { gate, prefix } = newGateWithPrefix();
    const now = Date.now();
    await fullWithLine(gate, now);
    expect(await redis.get(`${prefix}:gate:cap:sub_held`)).toBe("2");
    // max_in_flight 2 -> 4 with d1 and d2 still in flight: room for two of the three in line.
    expect(await gate.resize({ ...attempt("-"), maxInFlight: 4 }, now + 10)).toEqual([
      { deliveryId: "d3", at: now + 10 },
      { deliveryId: "d4", at: now + 10 },
    ]);
    expect(await gate.lineLength("sub_held")).toBe(1);
    // The cap a newcomer's pre-check compares with (once nobody is in line) is the new one.
    expect(await redis.get(`${prefix}:gate:cap:sub_held`)).toBe("4");
  });

  it("wakes nobody while a hold the gate knows of lasts, and nobody when the new limits have no room", async () => {
    const gate = newGate();
    const now = Date.now();
    await fullWithLine(gate, now);
    expect(await gate.resize({ ...attempt("-"), maxInFlight: 2 }, now + 10)).toEqual([]);
    // d1 got a 429 with Retry-After: the line waits for the hold's end, whatever the cap.
    const holdEnd = now + 60_000;
    await gate.release({ ...attempt("d1"), holdUntil: holdEnd }, now + 20);
    expect(await gate.resize({ ...attempt("-"), maxInFlight: 10 }, now + 30)).toEqual([]);
    expect(await gate.lineLength("sub_held")).toBe(2);
  });

  it("wakes the head for when the rate window frees when a rate limit is raised but the window is full", async () => {
    const gate = newGate();
    const now = Date.now();
    const paced = (id: string, rateLimit: number) =>
      attempt(id, { subscriptionId: "sub_held", maxInFlight: 10, rateLimit });
    for (const id of ["r1", "r2"]) expect(await gate.acquire(paced(id, 2), now)).toMatchObject({ go: true });
    expect(await gate.acquire(paced("r3", 2), now + 1)).toMatchObject({ go: false, reason: "rate_limit" });
    expect(await gate.acquire(paced("r4", 2), now + 2)).toMatchObject({ go: false, reason: "in_line" });
    // r3 holds the turn for when the window frees; raised to 5 a second, r4 goes now too.
    expect(await gate.resize({ ...paced("-", 5) }, now + 10)).toEqual([{ deliveryId: "r4", at: now + 10 }]);
  });
});

describe("a test delivery at the gate", () => {
  it("goes ahead of the line and takes a slot, but waits for a Retry-After like the others", async () => {
    const { gate, prefix } = newGateWithPrefix();
    const now = Date.now();
    // max_in_flight 3: two in flight, one slot free, and two in line.
    const three = (id: string, overrides: Partial<GateInput> = {}) => attempt(id, { maxInFlight: 3, ...overrides });
    for (const id of ["d1", "d2", "d3"]) expect(await gate.acquire(three(id), now)).toMatchObject({ go: true });
    for (const id of ["d4", "d5"]) expect(await gate.acquire(three(id), now)).toMatchObject({ go: false });
    // A test goes ahead of d4 and d5, on the slot d1 frees.
    expect(await gate.release({ ...three("d1"), holdUntil: null }, now + 10)).toEqual([
      { deliveryId: "d4", at: now + 10 },
    ]);
    expect(await gate.acquire(three("t1", { test: true }), now + 11)).toMatchObject({
      go: false,
      reason: "max_in_flight",
    });
    expect(await redis.zrange(`${prefix}:gate:line:sub_held`, "0", "-1")).toEqual(["t1", "d5"]);

    // d2's 503 with Retry-After holds the subscription for a minute.
    const holdEnd = now + 60_000;
    await gate.release({ ...three("d2"), holdUntil: holdEnd }, now + 20);
    // A test claimed now sees the hold in the subscription's health, and waits for its end like the
    // others: the receiver asked for the pause.
    expect(await gate.acquire(three("t2", { heldUntil: holdEnd, test: true }), now + 30)).toMatchObject({
      go: false,
      reason: "retry_after",
    });
    expect(await gate.lineLength("sub_held")).toBe(3);
  });

  it("goes as the probe of an open circuit", async () => {
    const gate = newGate();
    const now = Date.now();
    // The probe is due (the API brought it forward): the test takes it, and the line waits for its outcome.
    expect(await gate.acquire(attempt("t1", { circuitOpen: true, test: true }), now)).toEqual({
      go: true,
      probe: true,
      wakes: [],
    });
    expect(await gate.acquire(attempt("d1", { circuitOpen: true }), now + 1)).toMatchObject({
      go: false,
      reason: "circuit_open",
    });
  });
});
