import { connectRedis, dispatchJobId, queueLayoutFor } from "@webhooks/queue";
import { waitFor } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { createDeliveryWorker } from "../src/delivery-worker.ts";
import { workerTest as it } from "./fixtures.ts";
import { deliveriesOf, publish, subscribe } from "./stack.ts";

/**
 * A publish's new deliveries go to the queue as dispatch jobs of up to 20 (the job catalog): the
 * worker attempts each as if it had its own job, gives a job of its own to any that must come
 * back later, and lets go of the dispatch's deliveries once each has ended or has one.
 */
describe("a dispatch job", () => {
  it("attempts its deliveries, gives the one to retry a job of its own at its retry's time, and lets go of them all", async ({
    stack,
    receiver,
  }) => {
    const s = await stack({ RETRY_SCHEDULE: "1h" });
    const ok = await receiver();
    const failing = await receiver(() => ({ status: 500 }));
    const delivered = [
      await subscribe(s.api, { url: `${ok.url}/a`, events: ["order.created"] }),
      await subscribe(s.api, { url: `${ok.url}/b`, events: ["order.created"] }),
    ];
    const retried = await subscribe(s.api, { url: failing.url, events: ["order.created"] });
    ok.secrets.push(...delivered.map((sub) => sub.secret));
    failing.secrets.push(retried.secret);

    const event = await publish(s.api, { type: "order.created", data: { order: 1 } });
    await waitFor(
      async () => ok.received.length === 2 && failing.received.length === 1 && (await s.api.queue.dispatching()) === 0,
      {
        what: "each delivery attempted, and the dispatch done with them",
      },
    );
    const deliveries = await deliveriesOf(s.api, event.id);
    const retry = deliveries.find((d) => d.subscription_id === retried.id)!;
    await waitFor(async () => (await s.api.call("GET", `/v1/deliveries/${retry.id}`)).body.status === "failed", {
      what: "the failure recorded",
    });

    // The delivery to retry has a job of its own, parked until its retry an hour from now.
    const job = await s.api.queue.queueOf(retry.id).getJob(retry.id);
    expect(job?.data).toEqual({ deliveryId: retry.id, subscriptionId: retried.id });
    expect(await job?.isDelayed()).toBe(true);
    // An hour, give or take the schedule's jitter (a fifth).
    expect(job!.timestamp + job!.delay).toBeGreaterThan(Date.now() + 45 * 60_000);
    // The dispatch has finished and left Redis, and so has every job of the delivered ones.
    const ids = deliveries.map((d) => d.id as string).sort();
    expect(await s.api.queue.queueOf(ids[0]!).getJob(dispatchJobId(ids[0]!))).toBeUndefined();
    for (const d of deliveries.filter((d) => d.id !== retry.id)) {
      await waitFor(async () => (await s.api.call("GET", `/v1/deliveries/${d.id}`)).body.status === "delivered", {
        what: "delivered",
      });
      expect(await s.api.queue.queueOf(d.id).getJob(d.id)).toBeUndefined();
    }
  });

  it("holds no more attempts at once than WORKER_CONCURRENCY, however many deliveries it carries", async ({
    stack,
    receiver,
  }) => {
    const s = await stack({ WORKER_CONCURRENCY: "2" });
    const slow = await receiver(() => ({ status: 200, delayMs: 300 }));
    const subscriptions = [];
    for (let i = 0; i < 6; i++)
      subscriptions.push(await subscribe(s.api, { url: `${slow.url}/${i}`, events: ["fan.out"] }));
    slow.secrets.push(...subscriptions.map((sub) => sub.secret));

    // One event, six deliveries, one dispatch job: a BullMQ worker slot of its own would let all six go at once.
    await publish(s.api, { type: "fan.out", data: {} });
    await waitFor(() => slow.received.length === 6, { what: "all six delivered" });
    expect(slow.maxConcurrent).toBe(2);
  });

  for (const [inLine, runs] of [
    [true, "stays parked until its turn"],
    [false, "runs at once when the gate no longer knows it (Redis lost the line meanwhile)"],
  ] as const) {
    it(`gives a delivery that must wait a job of its own, parked, which ${runs}`, async ({ queuedAttempt, defer }) => {
      let acquired = 0;
      let placed = 0;
      const { config, queue, deps, deliveryId, subscriptionId } = await queuedAttempt({
        gate: {
          precheck: async () => "go" as const,
          acquire: async () => {
            acquired++;
            return { go: false, reason: "max_in_flight", wakes: [] };
          },
          // Once back, it would be in the line again.
          placeOf: async () => ({ turn: null, inLine: placed++ > 0 || inLine }),
          turnOf: async () => null,
        },
        sender: { send: async () => expect.unreachable("nothing may start") },
      });
      const workerRedis = connectRedis(config, "worker");
      defer(async () => workerRedis.disconnect());
      const worker = createDeliveryWorker(deps, {
        connection: workerRedis,
        prefix: queueLayoutFor(config).shardPrefixes[0]!,
        concurrency: 1,
        lockMs: 30_000,
      });
      defer(() => worker.close(true));
      void worker.run();

      const parked = async () => {
        const job = await queue.queueOf(deliveryId).getJob(deliveryId);
        return job !== undefined && (await job.isDelayed()) ? job : undefined;
      };
      await waitFor(async () => (await queue.dispatching()) === 0 && (await parked()) !== undefined, {
        what: "the dispatch done with its delivery, parked",
      });
      // Woken to run at once, it was tried a second time; otherwise it waits for its fallback timer, minutes away.
      await waitFor(() => acquired === (inLine ? 1 : 2), { what: `${inLine ? 1 : 2} tries` });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(acquired).toBe(inLine ? 1 : 2);
      const job = await parked();
      expect(job?.data).toEqual({ deliveryId, subscriptionId, waited: true });
      expect(job!.timestamp + job!.delay).toBeGreaterThan(Date.now() + 60_000);
    });
  }
});
