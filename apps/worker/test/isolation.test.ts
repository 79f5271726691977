import { sql, type TestReceiver, waitFor } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { deliveriesOfSubscription, gateOf, isolationTest as it, sleep } from "./isolation-fixtures.ts";
import { publish, subscribe } from "./stack.ts";

/**
 * Endpoint isolation (docs/api.md#endpoint-isolation), with real receivers on loopback: one
 * customer's slow, dead or refusing endpoint never delays anyone else's webhooks, and the limits a
 * subscription sets hold across every worker process.
 */
describe("endpoint isolation", () => {
  it("keeps a healthy subscription's webhooks flowing beside endpoints that never answer", async ({
    stack,
    receiver,
  }) => {
    // 20 worker slots; five hanging endpoints may hold 2 each. Without isolation the hanging
    // deliveries would take every slot for the whole timeout.
    const s = await stack({
      WORKER_CONCURRENCY: "20",
      DEFAULT_MAX_IN_FLIGHT: "2",
      DELIVERY_TIMEOUT: "8s",
      RETRY_SCHEDULE: "1s",
    });
    const healthy = await receiver();
    const hanging: TestReceiver[] = [];
    for (let i = 0; i < 5; i++) {
      const rx = await receiver(() => ({ status: 200, delayMs: 60_000 }));
      hanging.push(rx);
      await subscribe(s.api, { url: rx.url, events: ["noise"] });
    }
    const sub = await subscribe(s.api, { url: healthy.url, events: ["healthy"] });
    healthy.secrets.push(sub.secret);

    // 100 deliveries to the hanging endpoints, then the healthy events beside them.
    for (let i = 0; i < 20; i++) await publish(s.api, { type: "noise", data: { i } });
    await waitFor(() => hanging.every((rx) => rx.concurrent === 2), {
      what: "every hanging endpoint holding its 2 slots",
    });
    const sentAt: number[] = [];
    for (let i = 0; i < 20; i++) {
      sentAt.push(Date.now());
      await publish(s.api, { type: "healthy", data: { i } });
      await sleep(50);
    }
    await waitFor(() => healthy.received.length === 20, { timeoutMs: 5_000, what: "all 20 healthy webhooks" });
    const latencies = healthy.received.map((webhook) => webhook.receivedAt - sentAt[Number(webhook.json.data.i)]!);
    // Well under the 8 s the hanging attempts take: they did not wait for a slot.
    expect(Math.max(...latencies)).toBeLessThan(2_000);
    expect(healthy.received.every((webhook) => webhook.signatureValid)).toBe(true);
    // Each hanging endpoint never saw more than its max_in_flight.
    expect(hanging.map((rx) => rx.maxConcurrent)).toEqual([2, 2, 2, 2, 2]);
    // The waiting deliveries spent no attempt: only those in flight count one.
    const noise = (await s.api.call("GET", "/v1/deliveries?limit=100&event=noise")).body.data as Record<string, any>[];
    expect(noise).toHaveLength(100);
    expect(noise.filter((d) => d.attempts > 0)).toHaveLength(10);
  });

  it("caps a destination at max_in_flight across two worker processes, and at the origin's cap", async ({
    receiver,
    twoWorkerProcesses,
  }) => {
    const { api } = await twoWorkerProcesses({ WORKER_CONCURRENCY: "20", ORIGIN_MAX_IN_FLIGHT: "5" });
    const slow = await receiver(() => ({ status: 200, delayMs: 150 }));
    const sub = await subscribe(api, { url: `${slow.url}/capped`, events: ["capped"], max_in_flight: 3 });
    slow.secrets.push(sub.secret);
    for (let i = 0; i < 30; i++) await publish(api, { type: "capped", data: { i } });
    await waitFor(() => slow.received.length === 30, { timeoutMs: 30_000, what: "30 deliveries" });
    expect(slow.maxConcurrent).toBe(3);

    // Three subscriptions on one origin: together never more than ORIGIN_MAX_IN_FLIGHT.
    const shared = await receiver(() => ({ status: 200, delayMs: 150 }));
    for (let i = 0; i < 3; i++)
      await subscribe(api, { url: `${shared.url}/path-${i}`, events: ["shared"], max_in_flight: 4 });
    for (let i = 0; i < 15; i++) await publish(api, { type: "shared", data: { i } });
    await waitFor(() => shared.received.length === 45, { timeoutMs: 30_000, what: "45 deliveries to one origin" });
    expect(shared.maxConcurrent).toBe(5);
    // Waiting spent nothing: one attempt each.
    await waitFor(
      async () =>
        ((await api.call("GET", "/v1/deliveries?limit=100&status=queued")).body.data as unknown[]).length === 0,
      { what: "nothing queued" },
    );
    const all = (await api.call("GET", "/v1/deliveries?limit=100&event=shared")).body.data as Record<string, any>[];
    expect(all.map((d) => d.attempts)).toEqual(Array(45).fill(1));
  });

  it("marks the job of a delivery that waited, so that it leaves the line through Redis and not on a slot a worker kept", async ({
    stack,
    receiver,
  }) => {
    const s = await stack({ WORKER_CONCURRENCY: "10" });
    const slow = await receiver(() => ({ status: 200, delayMs: 2_000 }));
    const sub = await subscribe(s.api, { url: slow.url, events: ["one.at.a.time"], max_in_flight: 1 });
    slow.secrets.push(sub.secret);
    for (let i = 0; i < 3; i++) await publish(s.api, { type: "one.at.a.time", data: { i } });
    await waitFor(() => slow.concurrent === 1, { what: "the first delivery in flight" });
    const deliveries = await deliveriesOfSubscription(s.api, sub.id);
    // The two others wait, parked as delayed jobs that say so.
    await waitFor(
      async () => {
        const jobs = await Promise.all(deliveries.map((d) => s.api.queue.queueOf(d.id).getJob(d.id)));
        const parked = await Promise.all(
          jobs.map(
            async (job) =>
              job !== undefined && "waited" in job.data && job.data.waited === true && (await job.isDelayed()),
          ),
        );
        return parked.filter(Boolean).length === 2;
      },
      { what: "two parked jobs marked as waited" },
    );
    await waitFor(() => slow.received.length === 3, { timeoutMs: 15_000, what: "all three delivered, one at a time" });
    expect(slow.maxConcurrent).toBe(1);
  });

  it("starts the deliveries waiting for room at once when PUT raises max_in_flight, not when the attempt in flight ends", async ({
    stack,
    receiver,
    defer,
  }) => {
    const s = await stack({ WORKER_CONCURRENCY: "10", DELIVERY_TIMEOUT: "20s" });
    const { gate } = gateOf(s.env, defer);
    // The second body is a client that sends the whole object back, `active: true` included.
    for (const [i, body] of [{ max_in_flight: 4 }, { active: true, max_in_flight: 4 }].entries()) {
      // The receiver holds every request 10 s: the one in flight ends long after the PUT.
      const slow = await receiver(() => ({ status: 200, delayMs: 10_000 }));
      const sub = await subscribe(s.api, { url: slow.url, events: [`raised.${i}`], max_in_flight: 1 });
      for (let n = 0; n < 4; n++) await publish(s.api, { type: `raised.${i}`, data: { n } });
      await waitFor(() => slow.concurrent === 1, { what: "the first delivery in flight" });
      await waitFor(async () => (await gate.lineLength(sub.id)) === 3, { what: "three deliveries in line" });

      const raisedAt = Date.now();
      expect(await s.api.call("PUT", `/v1/subscriptions/${sub.id}`, { json: body })).toMatchObject({
        status: 200,
        body: { max_in_flight: 4 },
      });
      await waitFor(() => slow.concurrent === 4, {
        timeoutMs: 5_000,
        what: `all four in flight under the new cap, after PUT ${JSON.stringify(body)}`,
      });
      expect(Date.now() - raisedAt).toBeLessThan(5_000);
      expect(await gate.lineLength(sub.id)).toBe(0);
    }
  });

  it("leaves the line alone when PUT raises max_in_flight while the subscription's health holds it", async ({
    database,
    stack,
    receiver,
    defer,
  }) => {
    const s = await stack({ WORKER_CONCURRENCY: "10", DELIVERY_TIMEOUT: "20s" });
    const { gate, redis, layout } = gateOf(s.env, defer);
    const slow = await receiver(() => ({ status: 200, delayMs: 10_000 }));
    const sub = await subscribe(s.api, { url: slow.url, events: ["held.raise"], max_in_flight: 1 });
    for (let n = 0; n < 3; n++) await publish(s.api, { type: "held.raise", data: { n } });
    await waitFor(async () => slow.concurrent === 1 && (await gate.lineLength(sub.id)) === 2, {
      what: "one in flight, two in line",
    });
    // The receiver asked for a pause (a Retry-After an hour long), as its health in PostgreSQL says;
    // the gate's own record of a hold lasts at most a lease, and there is none here.
    await sql(database.url, "UPDATE subscriptions SET held_until = now() + interval '1 hour' WHERE id = $1", [sub.id]);

    expect(await s.api.call("PUT", `/v1/subscriptions/${sub.id}`, { json: { max_in_flight: 3 } })).toMatchObject({
      status: 200,
      body: { max_in_flight: 3 },
    });
    // Woken, the two would be claimed only to be taken back (their claims would find the hold and
    // leave the gate a record of it) and sent back to the line.
    await sleep(500);
    expect(await redis.exists(`${layout.gatePrefix}hold:${sub.id}`)).toBe(0);
    expect(await gate.lineLength(sub.id)).toBe(2);
    expect(slow.concurrent).toBe(1);
  });

  it("parks a job whose fallback timer fired while it was still in line again, for longer", async ({
    stack,
    receiver,
    defer,
  }) => {
    const s = await stack({ WORKER_CONCURRENCY: "10" });
    const slow = await receiver(() => ({ status: 200, delayMs: 3_000 }));
    const sub = await subscribe(s.api, { url: slow.url, events: ["long.line"], max_in_flight: 1 });
    for (let i = 0; i < 3; i++) await publish(s.api, { type: "long.line", data: { i } });
    await waitFor(() => slow.concurrent === 1, { what: "the first delivery in flight" });
    const { redis, layout, gate } = gateOf(s.env, defer);
    await waitFor(async () => (await gate.lineLength(sub.id)) === 2, { what: "two deliveries in line" });
    const deliveries = await deliveriesOfSubscription(s.api, sub.id);
    const parkedUntil = async (deliveryId: string) => {
      const queue = s.api.queue.queueOf(deliveryId);
      const score = await redis.zscore(queue.keys.delayed!, deliveryId);
      const job = await queue.getJob(deliveryId);
      return score === null ? null : { at: Math.floor(Number(score) / 0x1000), data: job?.data };
    };
    // Parked on their first wait until a turn, or 15 minutes (a fifth either way) as a last resort.
    const parked = await waitFor(
      async () => {
        const found = (await Promise.all(deliveries.map((d) => parkedUntil(d.id)))).filter((p) => p !== null);
        return found.length === 2 ? found : undefined;
      },
      { what: "two parked jobs" },
    );
    for (const { at, data } of parked) {
      expect(at - Date.now()).toBeGreaterThan(11 * 60_000);
      expect(at - Date.now()).toBeLessThan(18 * 60_000 + 1_000);
      expect(data).toEqual({ deliveryId: expect.any(String), subscriptionId: sub.id, waited: true });
    }

    // The last in line's timer fires (promoted by hand): still behind the head, it is parked
    // again, for an hour this time (deliverAttempt's tests show it is not claimed).
    const inLine = await redis.zrange(`${layout.gatePrefix}line:${sub.id}`, "0", "-1");
    expect(inLine).toHaveLength(2);
    const tail = inLine[1]!;
    await (await s.api.queue.queueOf(tail).getJob(tail))!.promote();
    const again = await waitFor(
      async () => {
        const p = await parkedUntil(tail);
        return p !== null && p.at - Date.now() > 30 * 60_000 ? p : undefined;
      },
      { what: "the job parked again, for longer" },
    );
    expect(again.at - Date.now()).toBeGreaterThan(47 * 60_000);
    expect(again.at - Date.now()).toBeLessThan(72 * 60_000 + 1_000);
    expect(await gate.lineLength(sub.id)).toBe(2);
    const tailDelivery = (await deliveriesOfSubscription(s.api, sub.id)).find((d) => d.id === tail);
    expect(tailDelivery).toMatchObject({ status: "queued", attempts: 0 });
  });

  it("holds rate_limit across two worker processes", async ({ receiver, twoWorkerProcesses }) => {
    const { api } = await twoWorkerProcesses({ WORKER_CONCURRENCY: "20" });
    const rx = await receiver();
    const sub = await subscribe(api, { url: rx.url, events: ["limited"], rate_limit: 5 });
    rx.secrets.push(sub.secret);
    // Published at once, so that the span below is the limiter's: one at a time, the publishes
    // would pace the deliveries themselves whenever a loaded host made each take over 200 ms.
    await Promise.all(Array.from({ length: 20 }, (_, i) => publish(api, { type: "limited", data: { i } })));
    await waitFor(() => rx.received.length === 20, { timeoutMs: 30_000, what: "20 deliveries" });
    const times = rx.received.map((webhook) => webhook.receivedAt).sort((a, b) => a - b);
    // Any 6 requests leave at least 1.1 s apart (the limiter's window, held exactly by the gate's
    // tests), so 11 leave over at least 2.2 s and 20 over at least 3.3 s. The receiver's own clock
    // runs in this test process, which shares 2 cores with the whole suite: its timestamps lag by
    // up to several hundred ms on a loaded host. So here: the 20 span at least 2.6 s, which a limit
    // held per process instead of across both (10/s: ~1.1 s) would not, and no 11 arrive within
    // 1.1 s, which takes over a second of lag to break. Without a limit, all 20 arrive within
    // ~100 ms.
    expect(times.at(-1)! - times[0]!).toBeGreaterThanOrEqual(2_600);
    for (let i = 0; i + 10 < times.length; i++) expect(times[i + 10]! - times[i]!).toBeGreaterThanOrEqual(1_100);
    // And the limit is a limit, not a stall. 20 at 5/s take about 3.3 s (3.4-3.7 s here beside two
    // CPU hogs), but each new window's deliveries go through a wake, a claim and the gate first,
    // and in the full suite on 2 cores that took up to 6.2 s. A stall the gate could cause is
    // longer: a lost wake waits 10 s for its turn to lapse, a parked job's timer 15 minutes.
    expect(times.at(-1)! - times[0]!).toBeLessThan(9_000);
    expect(rx.received.every((webhook) => webhook.signatureValid)).toBe(true);
  });

  it("delivers everything once receivers recover, with nothing lost or left waiting", async ({ stack, receiver }) => {
    const s = await stack({
      WORKER_CONCURRENCY: "10",
      DEFAULT_MAX_IN_FLIGHT: "2",
      RETRY_SCHEDULE: "200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms",
      CIRCUIT_FAILURE_THRESHOLD: "2",
      CIRCUIT_PROBE_INTERVAL: "500ms",
      DELIVERY_TIMEOUT: "1s",
    });
    let up = false;
    const flaky = await Promise.all([0, 1, 2].map(() => receiver(() => (up ? { status: 200 } : { status: 503 }))));
    const slow = await receiver(() => (up ? { status: 200 } : { status: 200, delayMs: 5_000 }));
    for (const rx of [...flaky, slow]) await subscribe(s.api, { url: rx.url, events: ["burst"] });
    for (let i = 0; i < 25; i++) await publish(s.api, { type: "burst", data: { i } });
    await sleep(2_000);
    up = true;
    await waitFor(
      async () =>
        ((await s.api.call("GET", "/v1/deliveries?limit=100&status=delivered")).body.data as unknown[]).length === 100,
      {
        timeoutMs: 30_000,
        what: "all 100 delivered",
      },
    );
    for (const rx of [...flaky, slow])
      expect(new Set(rx.received.filter((w) => w.headers["webhook-id"]).map((w) => w.json.data.i)).size).toBe(25);
  });

  it("delivers everything, within the limits, when a worker is killed mid-run holding slots", async ({
    receiver,
    twoWorkerProcesses,
  }) => {
    // The killed worker's slots come back when their lease ends (DELIVERY_TIMEOUT + 5 s), and the
    // reconciler wakes the lines it left; nothing waits for a wake that died with it.
    const { api, workers } = await twoWorkerProcesses({
      WORKER_CONCURRENCY: "10",
      DELIVERY_TIMEOUT: "1s",
      JOB_LOCK_DURATION: "2s",
      RETRY_SCHEDULE: "200ms,200ms,200ms,200ms,200ms",
    });
    const rx = await receiver(() => ({ status: 200, delayMs: 100 }));
    const sub = await subscribe(api, { url: rx.url, events: ["killed"], max_in_flight: 2 });
    rx.secrets.push(sub.secret);
    for (let i = 0; i < 40; i++) await publish(api, { type: "killed", data: { i } });
    await waitFor(() => rx.received.length >= 10, { what: "the run to be under way" });
    workers[0]!.kill("SIGKILL");
    await workers[0]!.exited;
    await waitFor(async () => (await deliveriesOfSubscription(api, sub.id)).every((d) => d.status === "delivered"), {
      timeoutMs: 40_000,
      what: "all 40 delivered",
    });
    expect(new Set(rx.received.map((w) => w.json.data.i)).size).toBe(40);
    expect(rx.maxConcurrent).toBeLessThanOrEqual(2);
    expect(rx.received.every((w) => w.signatureValid)).toBe(true);
  });
});
