import { claimDeliveries, resendDelivery, type TenantScope } from "@webhooks/db";
import { connectRedis } from "@webhooks/queue";
import { waitFor } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { createDeliveryWorker } from "../src/delivery-worker.ts";
import { workerTest as it } from "./fixtures.ts";

// A manual resend (POST /v1/deliveries/{id}/retry) that meets an attempt of the same delivery,
// its retry, under way. Before: the attempt's record overwrote the resend (the API had answered
// `queued`, and the delivery was back to failed with its next retry an hour away), and a resend
// that came just after the record could not promote the job, still active, which then parked
// itself until that retry.

const unscoped: TenantScope = { kind: "unscoped" };
const HOUR = 3_600_000;

describe("a resend while an attempt of the delivery is under way", () => {
  it("changes nothing while the attempt holds its lease: that attempt is the resend", async ({ queuedAttempt }) => {
    const { db, deliveryId } = await queuedAttempt({
      gate: {},
      sender: { send: async () => expect.unreachable("nothing is sent here") },
    });
    // Failed once, its retry come due, and a worker has just claimed it for that retry.
    await db.sql.query("UPDATE deliveries SET status = 'failed', attempts = 1, next_attempt_at = now() WHERE id = $1", [
      deliveryId,
    ]);
    const claimed = await claimDeliveries(
      { sql: db.sql },
      { claims: [{ deliveryId, leaseToken: "lease-1" }], leaseMs: 10_000 },
    );
    expect(claimed.has(deliveryId)).toBe(true);

    const resent = await resendDelivery({ db: db.prisma, scope: unscoped }, deliveryId);
    // Not queued under the attempt: its record, which writes the outcome and the next retry's
    // time, would undo that.
    expect(resent).toMatchObject({ status: "failed", attempts: 2 });
  });

  it("runs the job at once when it comes after the attempt's record, while the job is still parking itself", async ({
    queuedAttempt,
    defer,
  }) => {
    const sent: number[] = [];
    const { config, db, queue, deps, deliveryId } = await queuedAttempt({
      gate: { acquire: async () => ({ go: true, probe: false, wakes: [] }), release: async () => [] },
      sender: {
        send: async () => {
          sent.push(Date.now());
          return {
            durationMs: 1,
            responseCode: sent.length === 1 ? 500 : 200,
            responseBody: "",
            retryAfter: null,
            error: null,
            timedOut: false,
          };
        },
      },
    });
    // The first attempt fails and plans its retry an hour away. Right after its record commits,
    // before the worker parks the job, the delivery is resent, as the API does it.
    const record = deps.batches.record;
    let resends = 0;
    const batches = {
      ...deps.batches,
      record: async (...args: Parameters<typeof record>) => {
        const recorded = await record(...args);
        if (resends++ === 0) {
          expect(await resendDelivery({ db: db.prisma, scope: unscoped }, deliveryId)).toMatchObject({
            status: "queued",
            attempts: 1,
          });
          await queue.enqueueResend(deliveryId);
        }
        return recorded;
      },
    };
    const workerRedis = connectRedis(config, "worker");
    defer(async () => workerRedis.disconnect());
    const worker = createDeliveryWorker(
      { ...deps, batches, retryScheduleMs: [HOUR, HOUR] },
      { connection: workerRedis, prefix: queue.layout.shardPrefixes[0]!, concurrency: 1, lockMs: 30_000 },
    );
    defer(() => worker.close(true));
    void worker.run();

    await waitFor(
      async () =>
        (await db.sql.query<{ status: string }>("SELECT status FROM deliveries WHERE id = $1", [deliveryId]))[0]
          ?.status === "delivered",
      {
        timeoutMs: 10_000,
        what: "the resent delivery delivered at once, not at its retry an hour away",
      },
    );
    expect(sent).toHaveLength(2);
  });
});
