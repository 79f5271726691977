import { randomBytes } from "node:crypto";
import { createLogger } from "@webhooks/core";
import { createRedisConnection, deleteKeysOfPrefix, DeliveryGate, queueLayout, type GateInput, type Wake } from "@webhooks/queue";
import { REDIS_URL, waitFor } from "@webhooks/testing";
import { afterAll, describe, expect, it } from "vitest";

/**
 * Held room (the gate's doc): a worker process busy with a subscription holds a few of its slots
 * for `holdRoomMs`, and the attempts it starts and ends on them meanwhile do not call Redis. The
 * caps must hold exactly all the same, and whoever waits must get the room once it is given back.
 *
 * Real Redis; each gate stands for one worker process. The in-flight set is read directly: a
 * held slot is an entry of it, and an attempt on held room leaves it as it is.
 */
const redis = createRedisConnection(REDIS_URL, "gate");
const prefixes: string[] = [];
const HOLD_MS = 300;

afterAll(async () => {
  for (const prefix of prefixes) await deleteKeysOfPrefix(redis, prefix);
  redis.disconnect();
});

interface Process {
  gate: DeliveryGate;
  /** What the gate woke when it gave room back. */
  woken: Wake[];
}

function newPrefix(): string {
  const prefix = `test-${randomBytes(5).toString("hex")}`;
  prefixes.push(prefix);
  return prefix;
}

function processOn(prefix: string, holdRoomMs = HOLD_MS): Process {
  const woken: Wake[] = [];
  const gate = new DeliveryGate(redis, prefix, { holdRoomMs, wake: async (wakes) => void woken.push(...wakes), logger: createLogger({ level: "silent", name: "test" }) });
  return { gate, woken };
}

function attempt(deliveryId: string, overrides: Partial<GateInput> = {}): GateInput {
  return {
    deliveryId,
    subscriptionId: "sub_busy",
    origin: "http://127.0.0.1:1",
    maxInFlight: 10,
    originMaxInFlight: 50,
    rateLimit: null,
    heldUntil: null,
    circuitOpen: false,
    probeIntervalMs: 30_000,
    disabled: false,
    leaseMs: 60_000,
    ...overrides,
  };
}

const inFlight = (prefix: string) => redis.zcard(`${queueLayout(prefix).gatePrefix}in-flight:sub_busy`);

/** Attempts d1..dN started at once (one batch to Redis), each expected to go. */
async function startAll(gate: DeliveryGate, ids: string[], overrides: Partial<GateInput> = {}): Promise<void> {
  const decisions = await Promise.all(ids.map((id) => gate.acquire(attempt(id, overrides))));
  for (const decision of decisions) expect(decision).toMatchObject({ go: true });
}

describe("room held by a worker process at the gate", () => {
  it("starts and ends attempts on held slots without changing Redis, and gives the free ones back when its time is up", async () => {
    const prefix = newPrefix();
    const { gate } = processOn(prefix);
    // d1 asks for room along with its own slot: one more than the process has going (none).
    await startAll(gate, ["d1"]);
    expect(await inFlight(prefix)).toBe(2);
    // d2 runs on the held slot: Redis is not told.
    await startAll(gate, ["d2"]);
    expect(await inFlight(prefix)).toBe(2);
    // d2 ends: its slot stays with the process, for d3.
    expect(await gate.release(attempt("d2"))).toEqual([]);
    await startAll(gate, ["d3"]);
    expect(await inFlight(prefix)).toBe(2);
    await gate.release(attempt("d3"));
    // Past the holding time the free slot is released; d1 is still under way.
    await waitFor(async () => (await inFlight(prefix)) === 1, { timeoutMs: 5_000 });
    await gate.release(attempt("d1"));
    expect(await inFlight(prefix)).toBe(0);
    await gate.close();
  });

  it("asks for as many slots as the process has attempts of the subscription going, at most half the room left", async () => {
    const prefix = newPrefix();
    const { gate } = processOn(prefix);
    await startAll(gate, ["a1", "a2", "a3"]);
    // a1 asked for one slot (the call of a2 and a3 came along in the same batch, without asking).
    expect(await inFlight(prefix)).toBe(4);
    await startAll(gate, ["a4"]); // on the held slot
    await new Promise((resolve) => setTimeout(resolve, HOLD_MS + 50));
    // The room is past its time: a5 goes through Redis and asks for five slots (a1-a4 going, plus one).
    // Room left after a5: 10 - 4 (a1-a4) - 1 (a5) = 5, of which half (2) may be held.
    await startAll(gate, ["a5"]);
    expect(await inFlight(prefix)).toBe(4 + 1 + 2);
    await gate.close();
    expect(await inFlight(prefix)).toBe(5);
  });

  it("never lets two processes together run more than max_in_flight attempts, and every delivery that waited gets its turn", async () => {
    const prefix = newPrefix();
    const maxInFlight = 6;
    const perProcess = 150;
    // Like two worker processes of concurrency 4: eight slots for a cap of six, so attempts run on
    // held room while there is some, and find the subscription full at times.
    const slotsPerProcess = 4;
    const connection = createRedisConnection(REDIS_URL, "gate");
    let redisCalls = 0;
    const send = connection.sendCommand.bind(connection);
    connection.sendCommand = ((command: Parameters<typeof send>[0]) => (redisCalls++, send(command))) as typeof connection.sendCommand;
    let running = 0;
    let highest = 0;
    let highestTaken = 0;
    let waits = 0;
    let starts = 0;
    const done = new Set<string>();
    const parked = new Set<string>();
    const pending = [0, 1].map((p) => Array.from({ length: perProcess }, (_, i) => ({ deliveryId: `p${p}-${i}`, waited: false })));
    // A delivery woken (by a decision, a release, or a process giving room back) runs again, on either process.
    const wakeAll = (wakes: Wake[]) => {
      for (const { deliveryId, at } of wakes) {
        if (!parked.delete(deliveryId)) continue;
        setTimeout(() => pending[deliveryId.length % 2]!.unshift({ deliveryId, waited: true }), Math.max(0, at - Date.now()));
      }
    };
    const gates = [0, 1].map(() => new DeliveryGate(connection, prefix, { holdRoomMs: 50, wake: async (wakes) => wakeAll(wakes), logger: createLogger({ level: "silent", name: "test" }) }));
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
      highestTaken = Math.max(highestTaken, await redis.zcard(`${queueLayout(prefix).gatePrefix}in-flight:sub_busy`));
      await new Promise((resolve) => setTimeout(resolve, 1 + (starts % 4)));
      running--;
      done.add(deliveryId);
      wakeAll(await gate.release(input));
    };
    const slot = async (p: number): Promise<void> => {
      while (done.size < 2 * perProcess) {
        const next = pending[p]!.shift();
        if (next) await attemptOnce(gates[p]!, next.deliveryId, next.waited);
        else await new Promise((resolve) => setTimeout(resolve, 2));
      }
    };
    const everyone = Promise.all([0, 1].flatMap((p) => Array.from({ length: slotsPerProcess }, () => slot(p))));
    await waitFor(() => done.size === 2 * perProcess, { timeoutMs: 20_000, what: "every delivery to be done" });
    await everyone;
    for (const gate of gates) await gate.close();
    connection.disconnect();

    expect(highest).toBeLessThanOrEqual(maxInFlight);
    // Slots taken in Redis, held ones included.
    expect(highestTaken).toBeLessThanOrEqual(maxInFlight);
    // The cap was contended (some found it full, and attempts ran several at once), and held
    // room saved calls: fewer script runs than the two per attempt started without it.
    expect(waits).toBeGreaterThan(0);
    expect(highest).toBeGreaterThanOrEqual(maxInFlight / 2);
    expect(redisCalls).toBeLessThan(2 * starts);
  });

  it("wakes the delivery another process lined up while this one held the room, once the room is given back", async () => {
    const prefix = newPrefix();
    const holder = processOn(prefix);
    const other = processOn(prefix);
    const small = { maxInFlight: 4 };
    // The holder: h1 going, and one slot held (its ask, one, is less than half the three left).
    await startAll(holder.gate, ["h1"], small);
    expect(await inFlight(prefix)).toBe(2);
    // The other process takes the two slots left, then finds the subscription full: o3 waits in line.
    await startAll(other.gate, ["o1", "o2"], small);
    expect(await inFlight(prefix)).toBe(4);
    expect(await other.gate.acquire(attempt("o3", small))).toMatchObject({ go: false, reason: "max_in_flight" });
    // When the holder's time is up, its free slot goes back and o3 is woken.
    await waitFor(() => holder.woken.some((wake) => wake.deliveryId === "o3"), { timeoutMs: 5_000 });
    await Promise.all([holder.gate.close(), other.gate.close()]);
  });

  it("holds no room for attempts that must go through Redis: rate-limited, open circuit, or a delivery that waited in line", async () => {
    const prefix = newPrefix();
    const { gate } = processOn(prefix);
    await startAll(gate, ["r1"], { rateLimit: 100 });
    expect(await inFlight(prefix)).toBe(1);
    await startAll(gate, ["w1"], { waited: true });
    expect(await inFlight(prefix)).toBe(2);
    // A room held for ordinary attempts is not used by one that waited.
    // n1 may: it asks for three slots (r1 and w1 going, plus one) and gets them (half the seven left).
    await startAll(gate, ["n1"]);
    expect(await inFlight(prefix)).toBe(3 + 3);
    // A delivery that waited does not start on that room: it goes through Redis.
    await startAll(gate, ["w2"], { waited: true });
    expect(await inFlight(prefix)).toBe(7);
    await gate.close();
  });

  it("gives the room back at once when an attempt's outcome holds the subscription", async () => {
    const prefix = newPrefix();
    const { gate } = processOn(prefix, 60_000);
    await startAll(gate, ["d1"]);
    expect(await inFlight(prefix)).toBe(2);
    // d1 failed and opened the circuit: its slot and the held one are both released now.
    await gate.release({ ...attempt("d1"), holdUntil: Date.now() + 5_000 });
    await waitFor(async () => (await inFlight(prefix)) === 0, { timeoutMs: 5_000 });
    // The next attempt finds no room held: it goes through Redis (and asks for room again).
    await startAll(gate, ["d2"]);
    expect(await inFlight(prefix)).toBe(2);
    await gate.close();
  });
});
