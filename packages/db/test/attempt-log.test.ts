import { UNKNOWN_OUTCOME_ERROR } from "@webhooks/core";
import {
  type AttemptOutcome,
  claimDeliveries,
  createSubscription,
  publishEvents,
  recordAttempts,
  recordedAttempt,
  withdrawAttempts,
} from "@webhooks/db";
import { sql } from "@webhooks/testing";
import { beforeAll, beforeEach, expect, it } from "vitest";
import { fileDatabase, subscriptionContext } from "./file-database.ts";

// An attempt is on its delivery's row while in flight and written to delivery_attempts once, when
// it ends (packages/db/src/delivery-leases.ts). The log the API lists (the view
// delivery_attempt_log) must show every attempt through each of those steps, exactly once.

const file = fileDatabase();
let deliveryId: string;

const LEASE_MS = 60_000;
const ok: AttemptOutcome = {
  durationMs: 12,
  responseCode: 200,
  responseBody: "ok",
  error: null,
  timedOut: false,
  status: "delivered",
  nextAttemptInMs: null,
};
const failed: AttemptOutcome = {
  durationMs: 7,
  responseCode: 500,
  responseBody: "no",
  error: null,
  timedOut: false,
  status: "failed",
  nextAttemptInMs: 0,
};

beforeAll(async () => {
  await createSubscription(subscriptionContext(file.database), { url: "https://example.com/log", events: ["*"] });
});
beforeEach(async () => {
  await publishEvents({ sql: file.database.sql }, [{ type: "log.test", data: {} }]);
  [{ id: deliveryId }] = (await sql<{ id: string }>(
    file.url,
    "SELECT id FROM deliveries ORDER BY created_at DESC, id DESC LIMIT 1",
  )) as [{ id: string }];
});

async function claim(leaseToken: string) {
  const claimed = (
    await claimDeliveries({ sql: file.database.sql }, { claims: [{ deliveryId, leaseToken }], leaseMs: LEASE_MS })
  ).get(deliveryId);
  return claimed
    ? { deliveryId, leaseToken, attempt: claimed.attempt, closedAbandonedAttempt: claimed.closedAbandonedAttempt }
    : undefined;
}

/** The delivery's attempt log as the API reads it, oldest first, and its `attempts`. */
async function log() {
  const attempts = await sql<{
    id: string;
    number: number;
    duration_ms: number | null;
    response_code: number | null;
    error: string | null;
  }>(
    file.url,
    "SELECT id, number, duration_ms, response_code, error FROM delivery_attempt_log WHERE delivery_id = $1 ORDER BY number",
    [deliveryId],
  );
  const [row] = await sql<{ attempts: number }>(file.url, "SELECT attempts FROM deliveries WHERE id = $1", [
    deliveryId,
  ]);
  return { count: row!.attempts, attempts: attempts.map((a) => [a.number, a.duration_ms, a.response_code, a.error]) };
}

it("shows the attempt in flight from its claim, and once recorded, with its outcome", async () => {
  const lease = (await claim("a"))!;
  expect(lease.attempt.number).toBe(1);
  expect(lease.closedAbandonedAttempt).toBe(false);
  expect(await log()).toEqual({ count: 1, attempts: [[1, null, null, null]] });

  expect(await recordAttempts({ sql: file.database.sql }, [{ ...lease, outcome: ok }])).toEqual(
    new Map([[deliveryId, { subscriptionUnwell: false }]]),
  );
  expect(await log()).toEqual({ count: 1, attempts: [[1, 12, 200, null]] });
  const [stored] = await sql<{ id: string; started_at: Date }>(
    file.url,
    "SELECT id, started_at FROM delivery_attempts WHERE delivery_id = $1",
    [deliveryId],
  );
  expect(stored).toEqual({ id: lease.attempt.id, started_at: lease.attempt.startedAt });
});

it("takes a withdrawn attempt out of the log and the count", async () => {
  const lease = (await claim("a"))!;
  await withdrawAttempts({ sql: file.database.sql }, [lease]);
  expect(await log()).toEqual({ count: 0, attempts: [] });
  // The next claim is attempt 1 again.
  expect((await claim("b"))!.attempt.number).toBe(1);
});

it("closes an attempt whose worker never recorded it as one with an unknown outcome, and refuses that worker's record", async () => {
  const first = (await claim("a"))!;
  // Its worker died mid-send: the lease runs out.
  await sql(file.url, "UPDATE deliveries SET leased_until = now() - interval '1 second' WHERE id = $1", [deliveryId]);
  const second = (await claim("b"))!;
  expect(second.closedAbandonedAttempt).toBe(true);
  expect(second.attempt.number).toBe(2);
  expect(await log()).toEqual({
    count: 2,
    attempts: [
      [1, null, null, UNKNOWN_OUTCOME_ERROR],
      [2, null, null, null],
    ],
  });

  // The first worker comes back too late: nothing it says is written.
  expect(await recordAttempts({ sql: file.database.sql }, [{ ...first, outcome: ok }])).toEqual(new Map());
  await withdrawAttempts({ sql: file.database.sql }, [first]);
  expect(await log()).toEqual({
    count: 2,
    attempts: [
      [1, null, null, UNKNOWN_OUTCOME_ERROR],
      [2, null, null, null],
    ],
  });

  await recordAttempts({ sql: file.database.sql }, [{ ...second, outcome: failed }]);
  expect(await log()).toEqual({
    count: 2,
    attempts: [
      [1, null, null, UNKNOWN_OUTCOME_ERROR],
      [2, 7, 500, null],
    ],
  });
  const [closed] = await sql<{ id: string; started_at: Date }>(
    file.url,
    "SELECT id, started_at FROM delivery_attempts WHERE delivery_id = $1 AND number = 1",
    [deliveryId],
  );
  expect(closed).toEqual({ id: first.attempt.id, started_at: first.attempt.startedAt });
});

it("claims a delivery asked for twice in one call once, for one of the two", async () => {
  const claimed = await claimDeliveries(
    { sql: file.database.sql },
    {
      claims: [
        { deliveryId, leaseToken: "a" },
        { deliveryId, leaseToken: "b" },
      ],
      leaseMs: LEASE_MS,
    },
  );
  expect(claimed.size).toBe(1);
  const winner = claimed.get(deliveryId)!;
  expect(["a", "b"]).toContain(winner.leaseToken);
  expect(winner.attempt.number).toBe(1);
  expect(await log()).toEqual({ count: 1, attempts: [[1, null, null, null]] });
});

it("records an attempt beside the record of one whose lease it took, in the same call, and writes nothing of that one", async () => {
  // Both records name the same attempt: two jobs asked for the delivery in one claim.
  const winner = (await claim("a"))!;
  const loser = { ...winner, leaseToken: "b" };
  expect(
    await recordAttempts({ sql: file.database.sql }, [
      { ...loser, outcome: failed },
      { ...winner, outcome: ok },
    ]),
  ).toEqual(new Map([[deliveryId, { subscriptionUnwell: false }]]));
  expect(await log()).toEqual({ count: 1, attempts: [[1, 12, 200, null]] });

  // A worker whose lease ran out, and the one that took the delivery over, in one call.
  await publishEvents({ sql: file.database.sql }, [{ type: "log.test", data: {} }]);
  [{ id: deliveryId }] = (await sql<{ id: string }>(
    file.url,
    "SELECT id FROM deliveries ORDER BY created_at DESC, id DESC LIMIT 1",
  )) as [{ id: string }];
  const first = (await claim("c"))!;
  await sql(file.url, "UPDATE deliveries SET leased_until = now() - interval '1 second' WHERE id = $1", [deliveryId]);
  const second = (await claim("d"))!;
  expect(
    await recordAttempts({ sql: file.database.sql }, [
      { ...first, outcome: ok },
      { ...second, outcome: failed },
    ]),
  ).toEqual(new Map([[deliveryId, { subscriptionUnwell: false }]]));
  expect(await log()).toEqual({
    count: 2,
    attempts: [
      [1, null, null, UNKNOWN_OUTCOME_ERROR],
      [2, 7, 500, null],
    ],
  });
});

it("tells whether an attempt's outcome is in the log, for a record tried again after its answer was lost", async () => {
  const first = (await claim("a"))!;
  expect(await recordedAttempt({ sql: file.database.sql }, first.attempt.id)).toBeUndefined();
  // Closed by the next claim as one of unknown outcome: not recorded.
  await sql(file.url, "UPDATE deliveries SET leased_until = now() - interval '1 second' WHERE id = $1", [deliveryId]);
  const second = (await claim("b"))!;
  expect(await recordedAttempt({ sql: file.database.sql }, first.attempt.id)).toBeUndefined();

  await recordAttempts({ sql: file.database.sql }, [{ ...second, outcome: failed }]);
  // Tried again, the record finds the lease gone; the log has the outcome of its first try.
  expect(await recordAttempts({ sql: file.database.sql }, [{ ...second, outcome: failed }])).toEqual(new Map());
  expect(await recordedAttempt({ sql: file.database.sql }, second.attempt.id)).toEqual({ subscriptionUnwell: false });
});
