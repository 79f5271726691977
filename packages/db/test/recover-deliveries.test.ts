import {
  createSubscription,
  type PublishResult,
  publishEvents,
  type RecoveredBatch,
  recoverDeliveries,
} from "@webhooks/db";
import { expect, it } from "vitest";
import { fileDatabase, subscriptionContext } from "./file-database.ts";

const file = fileDatabase();

it("resends a delivery that failed in the very millisecond the recovery began", async () => {
  const { subscription } = await createSubscription(subscriptionContext(file.database), {
    url: "https://example.com/hook",
    events: ["r.failed"],
  });
  const [published] = await publishEvents({ sql: file.database.sql }, [{ type: "r.failed", data: {} }]);
  const [deliveryId] = (published as PublishResult).deliveryIds;

  // In one transaction, now() is one instant: the failure is recorded at the recovery's start.
  // updated_at keeps milliseconds (rounded), and the start was read back as a JavaScript Date
  // (truncated): the delivery looked updated after the start, as one failing during the
  // recovery does, and was left out.
  const resent = await file.database.prisma.$transaction(async (tx) => {
    await tx.$executeRaw`UPDATE deliveries SET status = 'failed', attempts = 1, next_attempt_at = NULL, updated_at = now() WHERE id = ${deliveryId}`;
    const batches: RecoveredBatch[] = [];
    const recovery = recoverDeliveries(
      { db: tx, scope: { kind: "unscoped" } },
      { subscriptionId: subscription.id, since: new Date(Date.now() - 3_600_000) },
    );
    let step = await recovery.next();
    while (!step.done) {
      batches.push(step.value);
      step = await recovery.next();
    }
    return { batches, count: step.value.count };
  });
  expect(resent).toEqual({ batches: [{ finished: [deliveryId], retrying: [] }], count: 1 });
});
