import { randomUUID } from "node:crypto";
import {
  claimDeliveries,
  createSubscription,
  findDueDeliveries,
  lineHeads,
  nextInLine,
  publishEvents,
  publishTestEvent,
  resendDelivery,
  stillDue,
  updateSubscription,
  whyNotClaimed,
} from "@webhooks/db";
import { sql } from "@webhooks/testing";
import { expect, it } from "vitest";
import { fileDatabase, subscriptionContext } from "./file-database.ts";

// Ordered delivery as PostgreSQL keeps it (docs/api.md#ordered-delivery): the claim takes an
// ordered delivery only at the head of its line, whatever the queue hands out.

const file = fileDatabase();
const ctx = () => ({ sql: file.database.sql });
const scoped = () => ({ db: file.database.prisma, sql: file.database.sql, scope: { kind: "unscoped" as const } });

async function fifoSubscription(ordering: "fifo" | "none" = "fifo") {
  const { subscription } = await createSubscription(subscriptionContext(file.database), {
    url: `https://example.com/${randomUUID()}`,
    events: [`ordered.${ordering}.${randomUUID()}`],
    ordering,
  });
  return subscription;
}

/** One event at a time, as a client that waits for each answer publishes: the line's order. */
async function publishInOrder(type: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const [result] = await publishEvents(ctx(), [{ type, data: { i } }]);
    if (!result || result instanceof Error) throw result ?? new Error("no result");
    ids.push(result.deliveryIds[0]!);
  }
  return ids;
}

const claim = async (ids: string[]) => [
  ...(
    await claimDeliveries(ctx(), {
      claims: ids.map((deliveryId) => ({ deliveryId, leaseToken: randomUUID() })),
      leaseMs: 60_000,
    })
  ).keys(),
];

const finish = (id: string, status: "delivered" | "failed" = "delivered") =>
  sql(
    file.url,
    "UPDATE deliveries SET status = $2::delivery_status, next_attempt_at = NULL, lease_token = NULL, leased_until = NULL, open_attempt_id = NULL WHERE id = $1",
    [id, status],
  );

it("claims an ordered delivery only at the head of its line, and the next once it is finished", async () => {
  const subscription = await fifoSubscription();
  const ids = await publishInOrder(subscription.events[0]!, 4);
  expect(subscription.ordering).toBe("fifo");

  // Handed out all at once, in reverse, only the first is taken.
  expect(await claim([...ids].reverse())).toEqual([ids[0]]);
  expect(await whyNotClaimed(ctx(), ids[1]!)).toEqual({ reason: "in_order" });
  // Being attempted, it still holds the line.
  expect(await claim(ids.slice(1))).toEqual([]);
  expect(await nextInLine(ctx(), [subscription.id])).toEqual([]);

  // Waiting for a retry, it holds the line too.
  await sql(
    file.url,
    "UPDATE deliveries SET status = 'failed', next_attempt_at = now() + interval '1 hour', lease_token = NULL, leased_until = NULL, open_attempt_id = NULL WHERE id = $1",
    [ids[0]],
  );
  expect(await claim(ids.slice(1))).toEqual([]);
  expect(await nextInLine(ctx(), [subscription.id])).toEqual([]);

  // Failed for good, it lets the next go; delivered, the one after.
  await finish(ids[0]!, "failed");
  expect(await nextInLine(ctx(), [subscription.id])).toEqual([ids[1]]);
  expect(await claim(ids.slice(1))).toEqual([ids[1]]);
  await finish(ids[1]!);
  expect(await claim(ids.slice(2))).toEqual([ids[2]]);
});

it("leaves deliveries outside the order alone: a subscription without it, a test event, a resend", async () => {
  const plain = await fifoSubscription("none");
  const plainIds = await publishInOrder(plain.events[0]!, 3);
  expect((await claim(plainIds)).sort()).toEqual([...plainIds].sort());

  const subscription = await fifoSubscription();
  const ids = await publishInOrder(subscription.events[0]!, 3);
  const { deliveryId: testId } = await publishTestEvent(ctx(), {
    subscriptionId: subscription.id,
    type: "webhook.test",
    data: {},
  });
  // The last of the line, resent, leaves it and goes at once; the test goes too; the head holds the rest.
  await resendDelivery(scoped(), ids[2]!);
  expect((await claim([ids[2]!, ids[1]!, testId])).sort()).toEqual([ids[2], testId].sort());
  // The head, resent while it waits for a retry, leaves the line too: the next is free.
  await sql(
    file.url,
    "UPDATE deliveries SET status = 'failed', next_attempt_at = now() + interval '1 hour' WHERE id = $1",
    [ids[0]],
  );
  await resendDelivery(scoped(), ids[0]!);
  expect(await nextInLine(ctx(), [subscription.id])).toEqual([ids[1]]);
  expect((await claim([ids[0]!, ids[1]!])).sort()).toEqual([ids[0], ids[1]].sort());
});

it("switching to none releases the line at once; switching to fifo orders only what comes after", async () => {
  const subscription = await fifoSubscription("none");
  const type = subscription.events[0]!;
  const before = await publishInOrder(type, 2);
  const switched = await updateSubscription({ ...subscriptionContext(file.database), ...scoped() }, subscription.id, {
    ordering: "fifo",
  });
  expect(switched).toMatchObject({ subscription: { ordering: "fifo" }, released: [] });
  const after = await publishInOrder(type, 3);
  // Those created before the switch go as before; the new ones form a line.
  expect((await claim([...before, ...after])).sort()).toEqual([...before, after[0]!].sort());

  const { subscription: none, released } = await updateSubscription(
    { ...subscriptionContext(file.database), ...scoped() },
    subscription.id,
    { ordering: "none" },
  );
  expect(none.ordering).toBe("none");
  expect(released.sort()).toEqual([...after].sort());
  expect((await claim(after.slice(1))).sort()).toEqual(after.slice(1).sort());
});

it("shows the reconciler the heads of the lines, and the rest as waiting in line, not missing a job", async () => {
  await sql(file.url, "UPDATE deliveries SET status = 'delivered', next_attempt_at = NULL, leased_until = NULL");
  const first = await fifoSubscription();
  const second = await fifoSubscription();
  const firstIds = await publishInOrder(first.events[0]!, 3);
  const secondIds = await publishInOrder(second.events[0]!, 2);
  await sql(
    file.url,
    "UPDATE deliveries SET next_attempt_at = next_attempt_at - interval '1 minute' WHERE next_attempt_at IS NOT NULL",
  );

  const due = await findDueDeliveries(ctx(), { graceMs: 1_000, limit: 100 });
  const inLine = due.filter((row) => row.inLine).map((row) => row.id);
  expect(inLine.sort()).toEqual([...firstIds.slice(1), ...secondIds.slice(1)].sort());
  expect((await stillDue(ctx(), { ids: due.map((row) => row.id), graceMs: 1_000 })).sort()).toEqual(
    [firstIds[0], secondIds[0]].sort(),
  );

  // Paged one line at a time; a head being attempted is not due.
  await claim([firstIds[0]!]);
  const heads = [];
  let after: string | undefined;
  for (;;) {
    const page = await lineHeads(ctx(), { graceMs: 1_000, limit: 1, after });
    if (page.length === 0) break;
    heads.push(...page.map(({ deliveryId, due }) => ({ deliveryId, due })));
    after = page.at(-1)!.subscriptionId;
  }
  expect(heads).toEqual(
    [first, second]
      .map((s, i) => ({ id: s.id, head: { deliveryId: i === 0 ? firstIds[0] : secondIds[0], due: i !== 0 } }))
      .sort((a, b) => (a.id < b.id ? -1 : 1))
      .map((entry) => entry.head),
  );
});
