import { createLogger } from "@webhooks/core";
import { REDIS_URL } from "@webhooks/testing";
import { afterAll, describe, expect, it } from "vitest";
import { createRedisConnection, DeliveryGate, type GateInput, type RedisConnection, type Wake } from "../src/index.ts";
import { gateInput } from "./gate-input.ts";
import { gateTestRedis } from "./gate-redis.ts";

/**
 * Origin lines (docs/architecture.md#origin-lines): deliveries that wait because their origin is
 * at ORIGIN_MAX_IN_FLIGHT are woken when an attempt at the origin ends (or starts with room
 * left), the subscriptions waiting there taking turns one at a time, and a newcomer waits behind
 * them. Real Redis, the gate alone, with explicit clocks where the order matters.
 */
const { redis, newPrefix } = gateTestRedis();

function newGate(): { gate: DeliveryGate; prefix: string } {
  const prefix = newPrefix();
  return { gate: new DeliveryGate(redis, prefix), prefix };
}

/** A delivery of subscription `subscriptionId` at one origin whose cap is 2. */
function at(subscriptionId: string, deliveryId: string, overrides: Partial<GateInput> = {}): GateInput {
  return gateInput(deliveryId, { subscriptionId, originMaxInFlight: 2, ...overrides });
}

const ids = (wakes: Wake[]) => wakes.map((wake) => wake.deliveryId);

/** x1 and x2 hold the origin's two slots; a1..a3 (sub_a), b1 (sub_b) and c1 (sub_c) wait for it, in that order. */
async function fullOrigin(gate: DeliveryGate, now: number): Promise<void> {
  for (const id of ["x1", "x2"]) expect(await gate.acquire(at("sub_x", id), now)).toMatchObject({ go: true });
  expect(await gate.acquire(at("sub_a", "a1"), now + 1)).toMatchObject({ go: false, reason: "origin_max_in_flight" });
  for (const id of ["a2", "a3"])
    expect(await gate.acquire(at("sub_a", id), now + 2)).toMatchObject({ go: false, reason: "in_line" });
  expect(await gate.acquire(at("sub_b", "b1"), now + 3)).toMatchObject({ go: false, reason: "origin_max_in_flight" });
  expect(await gate.acquire(at("sub_c", "c1"), now + 4)).toMatchObject({ go: false, reason: "origin_max_in_flight" });
}

describe("an origin at its cap", () => {
  it("gives its room to the subscriptions waiting for it a turn each, in their order, as attempts there end", async () => {
    const { gate } = newGate();
    const now = Date.now();
    await fullOrigin(gate, now);

    // x1 ends: sub_a's head has the turn, and sub_a goes to the back, behind sub_b and sub_c.
    expect(ids(await gate.release(at("sub_x", "x1"), now + 10))).toEqual(["a1"]);
    expect(ids(await gate.release(at("sub_x", "x2"), now + 11))).toEqual(["b1"]);
    // The turns are taken up: the origin is full again, and nobody else is woken.
    expect(await gate.acquire(at("sub_a", "a1", { waited: true }), now + 12)).toEqual({
      go: true,
      probe: false,
      wakes: [],
    });
    expect(await gate.acquire(at("sub_b", "b1", { waited: true }), now + 13)).toMatchObject({ go: true, wakes: [] });
    // sub_a has two more waiting, but sub_c's turn comes first.
    expect(ids(await gate.release(at("sub_a", "a1"), now + 20))).toEqual(["c1"]);
    expect(ids(await gate.release(at("sub_b", "b1"), now + 21))).toEqual(["a2"]);
    expect(await gate.acquire(at("sub_c", "c1", { waited: true }), now + 22)).toMatchObject({ go: true });
    expect(await gate.acquire(at("sub_a", "a2", { waited: true }), now + 23)).toMatchObject({ go: true });
    expect(ids(await gate.release(at("sub_c", "c1"), now + 30))).toEqual(["a3"]);
    expect(await gate.lineLength("sub_a")).toBe(0);
  });

  it("makes a newcomer wait behind those waiting for it, and counts a turn given out of its room until it is taken up", async () => {
    const { gate } = newGate();
    const now = Date.now();
    await fullOrigin(gate, now);
    // x1 ends and a1 has the turn, not yet taken up: its room is a1's.
    expect(ids(await gate.release(at("sub_x", "x1"), now + 10))).toEqual(["a1"]);
    expect(await gate.acquire(at("sub_n", "n1"), now + 11)).toMatchObject({
      go: false,
      reason: "origin_max_in_flight",
    });
    // Even a newcomer of a subscription with room of its own, and nobody in its own line, waits its turn at the origin.
    expect(await gate.acquire(at("sub_a", "a1", { waited: true }), now + 12)).toMatchObject({ go: true });
    expect(ids(await gate.release(at("sub_x", "x2"), now + 20))).toEqual(["b1"]);
    expect(ids(await gate.release(at("sub_a", "a1"), now + 21))).toEqual(["c1"]);
    // sub_a went to the back when a1 got its turn, before n1 came: n1 is behind it.
    expect(await gate.acquire(at("sub_b", "b1", { waited: true }), now + 22)).toMatchObject({ go: true });
    expect(ids(await gate.release(at("sub_b", "b1"), now + 30))).toEqual(["a2"]);
    expect(await gate.acquire(at("sub_c", "c1", { waited: true }), now + 31)).toMatchObject({ go: true });
    expect(ids(await gate.release(at("sub_c", "c1"), now + 40))).toEqual(["n1"]);
  });

  it("lets a newcomer go at once when nobody waits for the origin and it has room", async () => {
    const { gate } = newGate();
    const now = Date.now();
    expect(await gate.acquire(at("sub_x", "x1"), now)).toMatchObject({ go: true });
    expect(await gate.acquire(at("sub_y", "y1"), now + 1)).toMatchObject({ go: true });
    expect(await gate.release(at("sub_x", "x1"), now + 2)).toEqual([]);
    expect(await gate.acquire(at("sub_z", "z1"), now + 3)).toMatchObject({ go: true });
  });

  it("gives the room of a turn nobody took up to the next in line once it lapses", async () => {
    const { gate } = newGate();
    const now = Date.now();
    await fullOrigin(gate, now);
    expect(ids(await gate.release(at("sub_x", "x1"), now + 10))).toEqual(["a1"]);
    // a1's wake was lost. Over 10 s later its turn has lapsed (the reconciler wakes it from the
    // lapsed set), and an attempt that ends gives its room and the freed one to the next two.
    const later = now + 10_100;
    expect(ids(await gate.release(at("sub_x", "x2"), later))).toEqual(["b1", "c1"]);
    expect(await gate.nudgeAll(async () => {}, later + 1)).toEqual([{ deliveryId: "a1", at: later + 1 }]);
  });

  it("wakes the subscriptions waiting for it from the reconciler's nudge once the slots of a worker that died expire, and no sooner", async () => {
    const { gate } = newGate();
    const now = Date.now();
    // x1 and x2's worker dies holding the origin's slots: their leases end at now + 1 s.
    for (const id of ["x1", "x2"])
      expect(await gate.acquire(at("sub_x", id, { leaseMs: 1_000 }), now)).toMatchObject({ go: true });
    for (const [subscription, id] of [
      ["sub_a", "a1"],
      ["sub_b", "b1"],
      ["sub_c", "c1"],
    ] as const)
      expect(await gate.acquire(at(subscription, id), now + 1)).toMatchObject({ reason: "origin_max_in_flight" });
    // Leases still running: the nudge wakes nobody. In particular not the head of every line with
    // nothing of its own under way: each would only find the origin full.
    expect(await gate.nudgeAll(async () => {}, now + 500)).toEqual([]);
    // Leases over: the origin's room goes to the first two in its line.
    expect(ids(await gate.nudgeAll(async () => {}, now + 1_500))).toEqual(["a1", "b1"]);
  });

  it("passes over a subscription in its line that may not start (held), which the end of its hold wakes", async () => {
    const { gate } = newGate();
    const now = Date.now();
    const three = (subscription: string, id: string, overrides: Partial<GateInput> = {}) =>
      at(subscription, id, { originMaxInFlight: 3, ...overrides });
    for (const [subscription, id] of [
      ["sub_x", "x1"],
      ["sub_x", "x2"],
      ["sub_h", "h0"],
    ] as const)
      expect(await gate.acquire(three(subscription, id), now)).toMatchObject({ go: true });
    for (const [subscription, id] of [
      ["sub_a", "a1"],
      ["sub_h", "h1"],
      ["sub_c", "c1"],
    ] as const)
      expect(await gate.acquire(three(subscription, id), now + 1)).toMatchObject({ reason: "origin_max_in_flight" });
    // h0 got a 429 with Retry-After: a minute. h1 has the turn for its end; the slot h0 freed is a1's.
    const holdEnd = now + 60_000;
    expect(await gate.release({ ...three("sub_h", "h0"), holdUntil: holdEnd }, now + 10)).toEqual([
      { deliveryId: "h1", at: holdEnd },
      { deliveryId: "a1", at: now + 10 },
    ]);
    // sub_h is next in the origin's line, but held: the room goes to c1.
    expect(ids(await gate.release(three("sub_x", "x1"), now + 20))).toEqual(["c1"]);
  });
});

describe("many subscriptions on one origin, two worker processes", () => {
  const connections: RedisConnection[] = [];
  afterAll(() => {
    for (const connection of connections) connection.disconnect();
  });

  it("never lets more than the origin's cap start at once, and every delivery gets its turn with no nudge", async () => {
    const prefix = newPrefix();
    const originMax = 5;
    const subscriptions = 200;
    let running = 0;
    let highest = 0;
    const done = new Set<string>();
    const parked = new Set<string>();
    const pending: { deliveryId: string; subscriptionId: string; waited: boolean }[] = [];
    for (let i = 0; i < subscriptions; i++) {
      // A few busy subscriptions among many with one delivery each.
      const count = i % 40 === 0 ? 10 : 1;
      for (let n = 0; n < count; n++)
        pending.push({ deliveryId: `s${i}-d${n}`, subscriptionId: `s${i}`, waited: false });
    }
    const total = pending.length;
    const subscriptionOf = new Map(pending.map((p) => [p.deliveryId, p.subscriptionId]));
    const wakeAll = (wakes: Wake[]) => {
      for (const { deliveryId, at } of wakes) {
        if (!parked.delete(deliveryId)) continue;
        setTimeout(
          () => pending.unshift({ deliveryId, subscriptionId: subscriptionOf.get(deliveryId)!, waited: true }),
          Math.max(0, at - Date.now()),
        );
      }
    };
    const gates = [0, 1].map(() => {
      const connection = createRedisConnection(REDIS_URL, "gate");
      connections.push(connection);
      return new DeliveryGate(connection, prefix, {
        holdSlotsMs: 50,
        wake: async (wakes) => wakeAll(wakes),
        logger: createLogger({ level: "silent", name: "test" }),
      });
    });
    const input = (p: (typeof pending)[number]) =>
      gateInput(p.deliveryId, { subscriptionId: p.subscriptionId, originMaxInFlight: originMax, waited: p.waited });
    const attemptOnce = async (gate: DeliveryGate, p: (typeof pending)[number]): Promise<void> => {
      const decision = await gate.acquire(input(p));
      wakeAll(decision.wakes.filter((wake) => wake.deliveryId !== p.deliveryId));
      if (!decision.go) {
        parked.add(p.deliveryId);
        wakeAll(decision.wakes.filter((wake) => wake.deliveryId === p.deliveryId));
        return;
      }
      highest = Math.max(highest, ++running);
      await new Promise((resolve) => setTimeout(resolve, 1 + (done.size % 3)));
      running--;
      done.add(p.deliveryId);
      wakeAll(await gate.release({ ...input(p), holdUntil: null }));
    };
    // Each process runs up to 20 attempts at once, taking the next delivery whenever one is free.
    const loop = async (gate: DeliveryGate): Promise<void> => {
      const running: Promise<void>[] = [];
      const deadline = Date.now() + 30_000;
      while (done.size < total && Date.now() < deadline) {
        const next = pending.shift();
        if (next && running.length < 20) {
          const run: Promise<void> = attemptOnce(gate, next).finally(() => running.splice(running.indexOf(run), 1));
          running.push(run);
        } else {
          if (next) pending.unshift(next);
          await new Promise((resolve) => setTimeout(resolve, 1));
        }
      }
      await Promise.all(running);
    };
    await Promise.all(gates.map(loop));
    for (const gate of gates) await gate.close();
    expect({ done: done.size, parked: parked.size }).toEqual({ done: total, parked: 0 });
    expect(highest).toBeLessThanOrEqual(originMax);
    expect(await redis.zcard(`${prefix}:gate:in-flight-origin:http://127.0.0.1:1`)).toBe(0);
  });
});
