import { SecretBox } from "@webhooks/core";
import { createDatabase, createSubscription, publishEvents, recoverDeliveries, type Database, type PublishResult, type RecoveredBatch } from "@webhooks/db";
import { createTestDatabase, type TestDatabase } from "@webhooks/testing";
import { afterAll, beforeAll, expect, it } from "vitest";

let testDb: TestDatabase;
let database: Database;

beforeAll(async () => {
  testDb = await createTestDatabase();
  database = createDatabase({ databaseUrl: testDb.url, poolSize: 2 });
});
afterAll(async () => {
  await database.close();
  await testDb.drop();
});

it("resends a delivery that failed in the very millisecond the recovery began", async () => {
  const { subscription } = await createSubscription(
    { db: database.prisma, secretBox: new SecretBox(Buffer.alloc(32, 7)), destinationPolicy: { allowHttp: true, allowPrivateNetworks: true }, defaultMaxInFlight: 10 },
    { url: "https://example.com/hook", events: ["r.failed"] },
  );
  const [published] = await publishEvents({ sql: database.sql }, [{ type: "r.failed", data: {} }]);
  const [deliveryId] = (published as PublishResult).deliveryIds;

  // In one transaction, now() is one instant: the failure is recorded at the recovery's start.
  // updated_at keeps milliseconds (rounded), and the start was read back as a JavaScript Date
  // (truncated): the delivery looked updated after the start, as one failing during the
  // recovery does, and was left out.
  const resent = await database.prisma.$transaction(async (tx) => {
    await tx.$executeRaw`UPDATE deliveries SET status = 'failed', attempts = 1, next_attempt_at = NULL, updated_at = now() WHERE id = ${deliveryId}`;
    const batches: RecoveredBatch[] = [];
    const recovery = recoverDeliveries({ db: tx, scope: { kind: "unscoped" } }, { subscriptionId: subscription.id, since: new Date(Date.now() - 3_600_000) });
    let step = await recovery.next();
    while (!step.done) {
      batches.push(step.value);
      step = await recovery.next();
    }
    return { batches, count: step.value.count };
  });
  expect(resent).toEqual({ batches: [{ finished: [deliveryId], retrying: [] }], count: 1 });
});
