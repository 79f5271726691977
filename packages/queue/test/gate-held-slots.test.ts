import { createLogger } from "@webhooks/core";
import { REDIS_URL, waitFor } from "@webhooks/testing";
import { afterAll, describe, expect, it } from "vitest";
import {
  createRedisConnection,
  DeliveryGate,
  type GateInput,
  queueLayout,
  type RedisConnection,
  type Wake,
} from "../src/index.ts";
import { gateInput } from "./gate-input.ts";
import { gateTestRedis } from "./gate-redis.ts";

/**
 * Held slots (the gate's doc): in a worker process, an attempt that got its slot while nobody
 * waited leaves it to the process's next attempt of the same subscription for `holdSlotsMs`,
 * which then calls no Redis. The caps must hold exactly all the same, and whoever waits must get
 * the slot once it is released.
 *
 * Real Redis; each gate stands for one worker process, on a connection whose commands are
 * counted. The in-flight set is read directly: a kept slot is an entry of it.
 */
const { redis, newPrefix } = gateTestRedis();
const connections: RedisConnection[] = [];
const HOLD_MS = 300;

afterAll(() => {
  for (const connection of connections) connection.disconnect();
});

interface Process {
  gate: DeliveryGate;
  /** What the gate woke when it released kept slots. */
  woken: Wake[];
  /** Commands its connection sent to Redis. */
  redisCalls(): number;
}

function processOn(prefix: string, options: { holdSlotsMs?: number; wake?: (wakes: Wake[]) => void } = {}): Process {
  const connection = createRedisConnection(REDIS_URL, "gate");
  connections.push(connection);
  let calls = 0;
  const send = connection.sendCommand.bind(connection);
  connection.sendCommand = ((command: Parameters<typeof send>[0]) => {
    calls++;
    return send(command);
  }) as typeof connection.sendCommand;
  const woken: Wake[] = [];
  const wake = async (wakes: Wake[]) => {
    woken.push(...wakes);
    options.wake?.(wakes);
  };
  const gate = new DeliveryGate(connection, prefix, {
    holdSlotsMs: options.holdSlotsMs ?? HOLD_MS,
    wake,
    logger: createLogger({ level: "silent", name: "test" }),
  });
  return { gate, woken, redisCalls: () => calls };
}

function attempt(deliveryId: string, overrides: Partial<GateInput> = {}): GateInput {
  return gateInput(deliveryId, { subscriptionId: "sub_busy", maxInFlight: 10, ...overrides });
}

const inFlight = (prefix: string) => redis.zcard(`${queueLayout(prefix).gatePrefix}in-flight:sub_busy`);

async function start(gate: DeliveryGate, input: GateInput): Promise<void> {
  expect(await gate.acquire(input)).toMatchObject({ go: true });
}

describe("slots a worker process keeps at the gate", () => {
  it("leaves an attempt's slot to the process's next attempt of the subscription, which calls no Redis, and releases it when its time is up", async () => {
    const prefix = newPrefix();
    const { gate, redisCalls } = processOn(prefix);
    await start(gate, attempt("d1"));
    await gate.release(attempt("d1"));
    // d1's slot is kept: still taken in Redis.
    expect(await inFlight(prefix)).toBe(1);
    const calls = redisCalls();
    await start(gate, attempt("d2"));
    await gate.release(attempt("d2"));
    expect(redisCalls()).toBe(calls);
    expect(await inFlight(prefix)).toBe(1);
    // Past its time (counted from when d1 took it), the free slot is released.
    await waitFor(async () => (await inFlight(prefix)) === 0, { timeoutMs: 5_000 });
    // The next attempt goes through Redis again.
    await start(gate, attempt("d3"));
    expect(redisCalls()).toBeGreaterThan(calls);
    await gate.release(attempt("d3"));
    await gate.close();
    expect(await inFlight(prefix)).toBe(0);
  });

  it("never lets two processes together run more than max_in_flight attempts, and every delivery that waited gets its turn", async () => {
    const prefix = newPrefix();
    const maxInFlight = 6;
    const perProcess = 150;
    // Like two worker processes of concurrency 4: eight slots for a cap of six, so attempts run on
    // kept slots while there are some, and find the subscription full at times.
    const slotsPerProcess = 4;
    let running = 0;
    let highest = 0;
    let highestTaken = 0;
    let waits = 0;
    let starts = 0;
    const done = new Set<string>();
    const parked = new Set<string>();
    const pending = [0, 1].map((p) =>
      Array.from({ length: perProcess }, (_, i) => ({ deliveryId: `p${p}-${i}`, waited: false })),
    );
    // A delivery woken (by a decision, a release, or a process releasing kept slots) runs again, on either process.
    const wakeAll = (wakes: Wake[]) => {
      for (const { deliveryId, at } of wakes) {
        if (!parked.delete(deliveryId)) continue;
        setTimeout(
          () => pending[deliveryId.length % 2]!.unshift({ deliveryId, waited: true }),
          Math.max(0, at - Date.now()),
        );
      }
    };
    const processes = [0, 1].map(() => processOn(prefix, { holdSlotsMs: 50, wake: wakeAll }));
    const attemptOnce = async (gate: DeliveryGate, deliveryId: string, waited: boolean): Promise<void> => {
      const input = attempt(deliveryId, { maxInFlight, waited });
      const decision = await gate.acquire(input);
      wakeAll(decision.wakes.filter((wake) => wake.deliveryId !== deliveryId));
      if (!decision.go) {
        waits++;
        parked.add(deliveryId);
        wakeAll(decision.wakes.filter((wake) => wake.deliveryId === deliveryId));
        return;
      }
      starts++;
      highest = Math.max(highest, ++running);
      // Slots taken in Redis, kept ones included (asserted at the end, where a failure cannot go unseen).
      highestTaken = Math.max(highestTaken, await inFlight(prefix));
      await new Promise((resolve) => setTimeout(resolve, 1 + (starts % 4)));
      running--;
      done.add(deliveryId);
      wakeAll(await gate.release(input));
    };
    const slot = async (p: number): Promise<void> => {
      while (done.size < 2 * perProcess) {
        const next = pending[p]!.shift();
        if (next) await attemptOnce(processes[p]!.gate, next.deliveryId, next.waited);
        else await new Promise((resolve) => setTimeout(resolve, 2));
      }
    };
    const everyone = Promise.all([0, 1].flatMap((p) => Array.from({ length: slotsPerProcess }, () => slot(p))));
    await waitFor(() => done.size === 2 * perProcess, { timeoutMs: 20_000, what: "every delivery to be done" });
    await everyone;
    for (const { gate } of processes) await gate.close();

    expect(highest).toBeLessThanOrEqual(maxInFlight);
    expect(highestTaken).toBeLessThanOrEqual(maxInFlight);
    // The cap was contended (some found it full, attempts ran several at once), and kept slots
    // saved calls: fewer script runs than the two per attempt started without them.
    expect(waits).toBeGreaterThan(0);
    expect(highest).toBeGreaterThanOrEqual(maxInFlight / 2);
    expect(processes[0]!.redisCalls() + processes[1]!.redisCalls()).toBeLessThan(2 * starts);
  });

  it("wakes the delivery another process lined up while this one kept a free slot, once the slot is released", async () => {
    const prefix = newPrefix();
    const holder = processOn(prefix);
    const other = processOn(prefix);
    const small = { maxInFlight: 2 };
    await start(holder.gate, attempt("h1", small));
    await holder.gate.release(attempt("h1", small));
    expect(await inFlight(prefix)).toBe(1);
    // The other process takes the one slot left, then finds the subscription full: o2 waits in line.
    await start(other.gate, attempt("o1", small));
    expect(await other.gate.acquire(attempt("o2", small))).toMatchObject({ go: false, reason: "max_in_flight" });
    // When the holder's kept slot is past its time, it is released and o2 is woken.
    await waitFor(() => holder.woken.some((wake) => wake.deliveryId === "o2"), { timeoutMs: 5_000 });
    await Promise.all([holder.gate.close(), other.gate.close()]);
  });

  it("does not keep the slot of an attempt while the process has seen the subscription wait: the line gets it at once", async () => {
    const prefix = newPrefix();
    const { gate } = processOn(prefix);
    const one = { maxInFlight: 1 };
    await start(gate, attempt("a1", one));
    expect(await gate.acquire(attempt("a2", one))).toMatchObject({ go: false, reason: "max_in_flight" });
    expect(await gate.release(attempt("a1", one))).toEqual([{ deliveryId: "a2", at: expect.any(Number) }]);
    expect(await inFlight(prefix)).toBe(0);
    await gate.close();
  });

  it("keeps no slot taken when the subscription had less than a quarter of its cap to spare", async () => {
    const prefix = newPrefix();
    const [one, other] = [processOn(prefix), processOn(prefix)];
    const four = { maxInFlight: 4 };
    for (const id of ["b1", "b2"]) await start(other.gate, attempt(id, four));
    // a1 takes the third of four slots (a quarter to spare: it may be kept), a2 the fourth (it may not).
    await start(one.gate, attempt("a1", four));
    await start(one.gate, attempt("a2", four));
    await one.gate.release(attempt("a2", four));
    expect(await inFlight(prefix)).toBe(3);
    await one.gate.release(attempt("a1", four));
    expect(await inFlight(prefix)).toBe(3);
    await Promise.all([one.gate.close(), other.gate.close()]);
  });

  it("keeps no slot while the process itself has more than three quarters of the cap: its own next attempt would wait", async () => {
    const prefix = newPrefix();
    const { gate } = processOn(prefix);
    const four = { maxInFlight: 4 };
    for (const id of ["a1", "a2", "a3", "a4"]) await start(gate, attempt(id, four));
    // a1 ends while the process has all four: released, though it was taken with room to spare.
    await gate.release(attempt("a1", four));
    expect(await inFlight(prefix)).toBe(3);
    // a2 ends with three: kept.
    await gate.release(attempt("a2", four));
    expect(await inFlight(prefix)).toBe(3);
    await gate.close();
    expect(await inFlight(prefix)).toBe(2);
  });

  it("releases the free slots it keeps on an origin when an attempt finds the origin full, and the one who waits gets one", async () => {
    const prefix = newPrefix();
    // Kept for a minute: only giving them up can release them within the test.
    const { gate, woken } = processOn(prefix, { holdSlotsMs: 60_000 });
    const origin = { originMaxInFlight: 4 };
    const ofA = (id: string) => attempt(id, { ...origin, subscriptionId: "sub_a" });
    const ofB = (id: string) => attempt(id, { ...origin, subscriptionId: "sub_b" });
    await start(gate, ofA("a1"));
    await gate.release(ofA("a1"));
    const originSet = `${queueLayout(prefix).gatePrefix}in-flight-origin:${ofA("a1").origin}`;
    expect(await redis.zcard(originSet)).toBe(1);
    for (const id of ["b1", "b2", "b3"]) await start(gate, ofB(id));
    expect(await gate.acquire(ofB("b4"))).toMatchObject({ go: false, reason: "origin_max_in_flight" });
    // sub_a's kept slot is released, and b4, first in the origin's line, gets the turn.
    await waitFor(() => woken.some((wake) => wake.deliveryId === "b4"), { timeoutMs: 5_000 });
    expect(await redis.zcard(originSet)).toBe(3);
    await gate.close();
  });

  it("releases a kept slot past its time before an attempt that goes through Redis counts the slots", async () => {
    const prefix = newPrefix();
    const [one, other] = [processOn(prefix, { holdSlotsMs: 60_000 }), processOn(prefix)];
    // Leases long enough that no entry expires on the clock this test moves.
    const four = { maxInFlight: 4, leaseMs: 600_000 };
    const now = Date.now();
    await one.gate.acquire(attempt("a1", four), now);
    await one.gate.release(attempt("a1", four), now + 1);
    for (const id of ["b1", "b2", "b3"]) await start(other.gate, attempt(id, four));
    expect(await inFlight(prefix)).toBe(4);
    // Past a1's slot's time, before the timer has released it: a2 may not use it, and must not
    // find the subscription full because of it.
    expect(await one.gate.acquire(attempt("a2", four), now + 61_000)).toMatchObject({ go: true });
    expect(await inFlight(prefix)).toBe(4);
    await Promise.all([one.gate.close(), other.gate.close()]);
  });

  it("keeps no slot for attempts that must go through Redis: rate-limited, open circuit, or a delivery that waited in line", async () => {
    const prefix = newPrefix();
    const { gate } = processOn(prefix);
    for (const [id, overrides] of [
      ["r1", { rateLimit: 100 }],
      ["p1", { circuitOpen: true }],
      ["w1", { waited: true }],
    ] as const) {
      await start(gate, attempt(id, overrides));
      await gate.release(attempt(id, overrides));
      expect(await inFlight(prefix)).toBe(0);
    }
    // A slot kept for ordinary attempts is not used by a delivery that waited: it goes through Redis.
    await start(gate, attempt("n1"));
    await gate.release(attempt("n1"));
    await start(gate, attempt("w2", { waited: true }));
    expect(await inFlight(prefix)).toBe(2);
    await gate.close();
  });

  it("releases the kept slots at once when an attempt's outcome holds the subscription", async () => {
    const prefix = newPrefix();
    const { gate } = processOn(prefix, { holdSlotsMs: 60_000 });
    await start(gate, attempt("d1"));
    await start(gate, attempt("d2"));
    await gate.release(attempt("d1"));
    expect(await inFlight(prefix)).toBe(2);
    // d2 failed and opened the circuit: its slot and d1's kept one are both released now.
    await gate.release({ ...attempt("d2"), holdUntil: Date.now() + 5_000 });
    await waitFor(async () => (await inFlight(prefix)) === 0, { timeoutMs: 5_000 });
    await gate.close();
  });

  it("tells the kept slots' releases of that hold: whoever waits gets the turn for its end, not now", async () => {
    const prefix = newPrefix();
    const p = processOn(prefix, { holdSlotsMs: 60_000 });
    const q = processOn(prefix, { holdSlotsMs: 0 });
    const of4 = (id: string) => attempt(id, { maxInFlight: 4 });
    for (const id of ["d1", "d2"]) await start(p.gate, of4(id));
    for (const id of ["q1", "q2"]) await start(q.gate, of4(id));
    // The subscription is full: another delivery of q's waits in line.
    expect(await q.gate.acquire(of4("q5"))).toMatchObject({ go: false, reason: "max_in_flight" });
    // d1 ends, and p keeps its slot; then d2 gets a 429 with Retry-After.
    expect(await p.gate.release(of4("d1"))).toEqual([]);
    expect(await inFlight(prefix)).toBe(4);
    const holdUntil = Date.now() + 5_000;
    const wakes = await p.gate.release({ ...of4("d2"), holdUntil });
    await waitFor(async () => (await inFlight(prefix)) === 2, { timeoutMs: 5_000 });
    // Before, the kept slot's release ran first, found no hold yet and woke q5 at once, to be
    // claimed and taken back.
    expect([...wakes, ...p.woken].filter((wake) => wake.at < holdUntil)).toEqual([]);
    expect(await q.gate.turnOf("sub_busy", "q5")).toBe(holdUntil);
    await p.gate.close();
    await q.gate.close();
  });
});
