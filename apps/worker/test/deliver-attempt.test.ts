import type { GateDecision, GateInput } from "@webhooks/queue";
import { describe, expect } from "vitest";
import { type AttemptDeps, deliverAttempt } from "../src/deliver-attempt.ts";
import { workerTest } from "./fixtures.ts";

// The claim records the attempt as started (docs/api.md#delivery-states); when the gate does not
// let it start, whether it says "wait" or cannot be asked at all, the attempt must be taken back:
// nothing was sent, so nothing may count: waiting spends no attempt.

/** `setUp(acquire)`: one queued delivery, and an attempt's dependencies around a gate the test controls. */
const it = workerTest.extend(
  "setUp",
  async ({ queuedAttempt }) =>
    async (acquire: (input?: GateInput) => Promise<GateDecision>) => {
      const sent: string[] = [];
      const { db, deps, deliveryId, subscriptionId } = await queuedAttempt({
        gate: { acquire, release: async () => [] },
        sender: {
          send: async (url: string) => {
            sent.push(url);
            return {
              durationMs: 1,
              responseCode: 200,
              responseBody: "",
              retryAfter: null,
              error: null,
              timedOut: false,
            };
          },
        },
      });
      const stored = async () => {
        const [row] = await db.sql.query<{
          attempts: number;
          attemptOpen: boolean;
          leaseToken: string | null;
          logged: number;
        }>(
          `SELECT attempts, open_attempt_id IS NOT NULL AS "attemptOpen", lease_token AS "leaseToken",
              (SELECT count(*)::int FROM delivery_attempt_log WHERE delivery_id = $1) AS logged
       FROM deliveries WHERE id = $1`,
          [deliveryId],
        );
        return row;
      };
      return { db, deps, deliveryId, subscriptionId, sent, stored };
    },
);

describe("an attempt the gate does not let start", () => {
  it("is taken back when the destination makes it wait", async ({ setUp }) => {
    const { deps, deliveryId, sent, stored } = await setUp(async () => ({
      go: false,
      reason: "max_in_flight",
      wakes: [],
    }));
    const next = await deliverAttempt(deps, { deliveryId });
    expect(next.kind).toBe("parked");
    expect(sent).toEqual([]);
    expect(await stored()).toEqual({ attempts: 0, attemptOpen: false, leaseToken: null, logged: 0 });
  });

  it("is taken back when the gate cannot be asked (Redis failed), and the job fails", async ({ setUp }) => {
    const { deps, deliveryId, sent, stored } = await setUp(async () => {
      throw new Error("Connection is closed.");
    });
    await expect(deliverAttempt(deps, { deliveryId })).rejects.toThrow("Connection is closed.");
    expect(sent).toEqual([]);
    expect(await stored()).toEqual({ attempts: 0, attemptOpen: false, leaseToken: null, logged: 0 });
  });

  it("tells the gate whether the delivery waited in line before (its job says so)", async ({ setUp }) => {
    const seen: (boolean | undefined)[] = [];
    const { deps, deliveryId } = await setUp(async (input?: GateInput) => {
      seen.push(input?.waited);
      return { go: false, reason: "in_line", wakes: [] };
    });
    await deliverAttempt(deps, { deliveryId, waited: true });
    await deliverAttempt(deps, { deliveryId });
    expect(seen).toEqual([true, false]);
  });

  it("is not claimed at all when its job waited before and the gate's pre-check keeps it in line", async ({
    queuedAttempt,
  }) => {
    const prechecked: string[] = [];
    const { db, deps, deliveryId, subscriptionId } = await queuedAttempt({
      gate: {
        precheck: async (subscription: string) => {
          prechecked.push(subscription);
          return "stays" as const;
        },
        acquire: async () => expect.unreachable("a delivery kept in line is not claimed, so the gate is not asked"),
      },
      sender: { send: async () => expect.unreachable("nothing is sent") },
    });
    // Its job's fallback timer fired while it still waits in line: parked again, the row untouched.
    expect(await deliverAttempt(deps, { deliveryId, subscriptionId, waited: true })).toEqual({
      kind: "parked",
      subscriptionId,
      turnAt: null,
      stillInLine: true,
    });
    expect(prechecked).toEqual([subscriptionId]);
    const [row] = await db.sql.query<{ leaseToken: string | null; attemptOpen: boolean }>(
      `SELECT lease_token AS "leaseToken", open_attempt_id IS NOT NULL AS "attemptOpen" FROM deliveries WHERE id = $1`,
      [deliveryId],
    );
    expect(row).toEqual({ leaseToken: null, attemptOpen: false });
  });

  it("is sent and recorded once when the gate lets it start (the same set-up, for contrast)", async ({ setUp }) => {
    const { deps, deliveryId, sent, stored } = await setUp(async () => ({ go: true, probe: false, wakes: [] }));
    const next = await deliverAttempt(deps, { deliveryId });
    expect(next.kind).toBe("done");
    expect(sent).toEqual(["http://127.0.0.1:9/never"]);
    expect(await stored()).toEqual({ attempts: 1, attemptOpen: false, leaseToken: null, logged: 1 });
  });
});

// The same holds after the gate let it start, for as long as its request cannot have left.
describe("an attempt that fails before its request leaves", () => {
  const letsStart = async (): Promise<GateDecision> => ({ go: true, probe: false, wakes: [] });

  it("is taken back when a signing secret does not decrypt, and the job fails", async ({ setUp }) => {
    const { deps, deliveryId, sent, stored } = await setUp(letsStart);
    const secretKeys = {
      get: () => {
        throw new Error("Unsupported state or unable to authenticate data");
      },
    } as unknown as AttemptDeps["secretKeys"];
    await expect(deliverAttempt({ ...deps, secretKeys }, { deliveryId })).rejects.toThrow(
      "unable to authenticate data",
    );
    expect(sent).toEqual([]);
    expect(await stored()).toEqual({ attempts: 0, attemptOpen: false, leaseToken: null, logged: 0 });
  });

  it("is taken back when pacing a rate-limited subscription fails (Redis), and the job fails", async ({ setUp }) => {
    const { db, deps, deliveryId, sent, stored } = await setUp(letsStart);
    await db.sql.query("UPDATE subscriptions SET rate_limit = 5", []);
    // The set-up's gate is a plain object: spreading it keeps its acquire and release.
    const gate = {
      ...deps.gate,
      pace: async () => {
        throw new Error("Connection is closed.");
      },
    } as unknown as AttemptDeps["gate"];
    await expect(deliverAttempt({ ...deps, gate }, { deliveryId })).rejects.toThrow("Connection is closed.");
    expect(sent).toEqual([]);
    expect(await stored()).toEqual({ attempts: 0, attemptOpen: false, leaseToken: null, logged: 0 });
  });

  it("stays open once the request may have left (the sender failed mid-send): it is closed as unknown later", async ({
    setUp,
  }) => {
    const { deps, deliveryId, stored } = await setUp(letsStart);
    const sender = {
      send: async () => {
        throw new Error("socket hang up");
      },
    } as unknown as AttemptDeps["sender"];
    await expect(deliverAttempt({ ...deps, sender }, { deliveryId })).rejects.toThrow("socket hang up");
    // In the log as in flight, under its lease.
    const row = await stored();
    expect(row).toMatchObject({ attempts: 1, attemptOpen: true, logged: 1 });
    expect(row?.leaseToken).not.toBeNull();
  });
});

describe("a success whose claim saw the subscription healthy", () => {
  it("writes the health all the same when failures were recorded after the claim: the success ends the streak", async ({
    queuedAttempt,
  }) => {
    let failMeanwhile = async () => {};
    const { db, deps, deliveryId, subscriptionId } = await queuedAttempt({
      gate: { acquire: async () => ({ go: true, probe: false, wakes: [] }), release: async () => [] },
      sender: {
        send: async () => {
          await failMeanwhile();
          return { durationMs: 1, responseCode: 200, responseBody: "", retryAfter: null, error: null, timedOut: false };
        },
      },
    });
    // While the request is out, other attempts of the subscription fail and are recorded.
    failMeanwhile = async () =>
      void (await db.sql.query(
        "UPDATE subscriptions SET consecutive_failures = 4, failing_since = now() - interval '1 minute', last_failure_at = now()",
        [],
      ));
    // A success was written a moment ago: by the claim's snapshot this one changes nothing.
    await db.sql.query("UPDATE subscriptions SET last_success_at = now()", []);
    await deliverAttempt(deps, { deliveryId });
    const [row] = await db.sql.query<{ consecutive_failures: number; failing_since: Date | null }>(
      "SELECT consecutive_failures, failing_since FROM subscriptions WHERE id = $1",
      [subscriptionId],
    );
    // Before, the success was not written: the streak stood, and the next failure could open the circuit.
    expect(row).toEqual({ consecutive_failures: 0, failing_since: null });
  });
});

/**
 * `endedWith(response)`: one queued delivery sent to a receiver that answers `response`, through
 * a gate that lets it start and records what the release is told.
 */
const itEnds = workerTest.extend(
  "endedWith",
  async ({ queuedAttempt }) =>
    async (response: { responseCode: number; retryAfter?: string; succeededJustBefore?: boolean }) => {
      const releases: { holdUntil?: number | null }[] = [];
      const { db, deps, deliveryId } = await queuedAttempt({
        gate: {
          acquire: async () => ({ go: true, probe: false, wakes: [] }),
          release: async (input) => {
            releases.push(input);
            return [];
          },
        },
        sender: {
          send: async () => ({
            durationMs: 1,
            responseCode: response.responseCode,
            responseBody: "",
            retryAfter: response.retryAfter ?? null,
            error: null,
            timedOut: false,
          }),
        },
      });
      // A success recorded a moment ago: this attempt's success changes no health, and writes none.
      if (response.succeededJustBefore) await db.sql.query("UPDATE subscriptions SET last_success_at = now()", []);
      await deliverAttempt(deps, { deliveryId });
      expect(releases).toHaveLength(1);
      return releases[0]!;
    },
);

describe("what an ended attempt tells the gate of its subscription's hold", () => {
  itEnds("a success: nothing holds it", async ({ endedWith }) => {
    expect((await endedWith({ responseCode: 200 })).holdUntil).toBeNull();
  });

  itEnds(
    "a success that writes no health (one was written within the second): nothing holds it either",
    async ({ endedWith }) => {
      expect((await endedWith({ responseCode: 200, succeededJustBefore: true })).holdUntil).toBeNull();
    },
  );

  itEnds("a 429 with Retry-After: held until then, from the health it wrote", async ({ endedWith }) => {
    const before = Date.now();
    const { holdUntil } = await endedWith({ responseCode: 429, retryAfter: "30" });
    expect(holdUntil).toBeGreaterThanOrEqual(before + 29_000);
    expect(holdUntil).toBeLessThanOrEqual(Date.now() + 30_000);
  });

  itEnds("a 500 below the circuit's threshold: its health write says nothing holds it", async ({ endedWith }) => {
    expect((await endedWith({ responseCode: 500 })).holdUntil).toBeNull();
  });
});
