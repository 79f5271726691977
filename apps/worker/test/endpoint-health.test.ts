import { startTestApi } from "@webhooks/api/testing";
import { loadConfig } from "@webhooks/core";
import { testEnv, waitFor } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { deliveriesOfSubscription, gateOf, health, isolationTest as it, sleep } from "./isolation-fixtures.ts";
import { publish, subscribe } from "./stack.ts";

/**
 * Endpoint health at the workers, with real receivers on loopback: a Retry-After holds the whole
 * subscription, the circuit breaker opens and probes, and the service disables a subscription that
 * keeps failing or is gone, whose deliveries then wait without costing claims
 * (docs/api.md#endpoint-isolation).
 */
describe("endpoint health", () => {
  it("holds the whole subscription on a 429 with Retry-After, spending no attempt", async ({ stack, receiver }) => {
    const s = await stack({ RETRY_SCHEDULE: "100ms" });
    let refused = false;
    const rx = await receiver(() => {
      if (!refused) {
        refused = true;
        return { status: 429, headers: { "retry-after": "2" } };
      }
      return { status: 200 };
    });
    const sub = await subscribe(s.api, { url: rx.url, events: ["held"], max_in_flight: 1 });
    await publish(s.api, { type: "held", data: { i: 0 } });
    await waitFor(() => rx.received.length === 1, { what: "the 429" });
    const refusedAt = rx.received[0]!.receivedAt;
    const held = await waitFor(
      async () => {
        const current = await health(s.api, sub.id);
        return current.health.state === "circuit_open" ? current : undefined;
      },
      { what: "the hold" },
    );
    expect(Date.parse(held.health.retry_at) - refusedAt).toBeGreaterThan(1_500);
    // Published during the hold: they wait for its end, not only the delivery that got the 429.
    for (let i = 1; i <= 4; i++) await publish(s.api, { type: "held", data: { i } });
    // The 429, then the first delivery's retry and the other four, all after the hold.
    await waitFor(() => rx.received.length === 6, { timeoutMs: 10_000, what: "all five delivered" });
    for (const webhook of rx.received.slice(1)) expect(webhook.receivedAt - refusedAt).toBeGreaterThanOrEqual(1_900);
    const deliveries = await deliveriesOfSubscription(s.api, sub.id);
    await waitFor(async () => (await deliveriesOfSubscription(s.api, sub.id)).every((d) => d.status === "delivered"), {
      what: "all delivered",
    });
    // One attempt each, but the first: two (the 429, then its retry after the hold).
    expect((await deliveriesOfSubscription(s.api, sub.id)).map((d) => d.attempts).sort()).toEqual([1, 1, 1, 1, 2]);
    expect(deliveries).toHaveLength(5);
    expect((await health(s.api, sub.id)).health).toMatchObject({
      state: "healthy",
      retry_at: null,
      consecutive_failures: 0,
    });
  });

  it("opens the circuit, probes once per interval without spending attempts, and closes it on success", async ({
    stack,
    receiver,
  }) => {
    const s = await stack({
      RETRY_SCHEDULE: "100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms",
      CIRCUIT_FAILURE_THRESHOLD: "3",
      CIRCUIT_PROBE_INTERVAL: "1s",
    });
    let up = false;
    const rx = await receiver(() => ({ status: up ? 200 : 500 }));
    const monitor = await receiver();
    const sub = await subscribe(s.api, { url: rx.url, events: ["flaky"] });
    rx.secrets.push(sub.secret);
    const watcher = await subscribe(s.api, {
      url: monitor.url,
      events: ["operational.subscription.circuit_opened", "operational.subscription.circuit_closed"],
    });
    monitor.secrets.push(watcher.secret);
    // A "*" subscription never gets operational events.
    const everything = await receiver();
    await subscribe(s.api, { url: everything.url, events: ["*"] });

    for (let i = 0; i < 10; i++) await publish(s.api, { type: "flaky", data: { i } });
    await waitFor(async () => (await health(s.api, sub.id)).health.state === "circuit_open", {
      what: "the circuit to open",
    });
    const opened = await health(s.api, sub.id);
    expect(opened.health.consecutive_failures).toBeGreaterThanOrEqual(3);
    expect(opened.health.retry_at).not.toBeNull();

    // While open: about one probe per second, whatever the retry schedule (100 ms) would do.
    const before = rx.received.length;
    await sleep(3_000);
    const probes = rx.received.length - before;
    expect(probes).toBeGreaterThanOrEqual(1);
    expect(probes).toBeLessThanOrEqual(4);
    // Every attempt counted is a request the receiver got: no attempt is spent on waiting. A probe
    // can be under way at the moment of a read (counted, not yet received), so wait for a read
    // between two probes; attempts spent on waiting would keep the count above the requests.
    await waitFor(
      async () => {
        const received = rx.received.length;
        const spent = (await deliveriesOfSubscription(s.api, sub.id)).reduce((sum, d) => sum + d.attempts, 0);
        return spent === received && rx.received.length === received;
      },
      { timeoutMs: 5_000, what: "attempts counted to equal the requests received" },
    );

    up = true;
    await waitFor(async () => (await deliveriesOfSubscription(s.api, sub.id)).every((d) => d.status === "delivered"), {
      timeoutMs: 10_000,
      what: "the backlog to drain",
    });
    expect((await health(s.api, sub.id)).health).toMatchObject({
      state: "healthy",
      consecutive_failures: 0,
      retry_at: null,
    });

    await waitFor(() => monitor.received.length === 2, { what: "circuit_opened and circuit_closed" });
    expect(monitor.received.map((w) => w.json.type)).toEqual([
      "operational.subscription.circuit_opened",
      "operational.subscription.circuit_closed",
    ]);
    expect(monitor.received.every((w) => w.signatureValid)).toBe(true);
    expect(monitor.received[0]!.json.data).toMatchObject({
      subscription_id: sub.id,
      reason: "consecutive_failures",
      response_code: 500,
    });
    expect(monitor.received[1]!.json.data).toMatchObject({
      subscription_id: sub.id,
      reason: "probe_succeeded",
      response_code: 200,
      error: null,
    });
    expect(everything.received.filter((w) => w.json.type.startsWith("operational."))).toEqual([]);
  });

  it("disables a subscription that keeps failing for AUTO_DISABLE_AFTER, and tells the operator", async ({
    stack,
    receiver,
  }) => {
    const s = await stack({
      RETRY_SCHEDULE: "200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms",
      AUTO_DISABLE_AFTER: "1s",
      CIRCUIT_FAILURE_THRESHOLD: "100",
    });
    const rx = await receiver(() => ({ status: 500, body: "down" }));
    const monitor = await receiver();
    const sub = await subscribe(s.api, { url: rx.url, events: ["doomed"] });
    const watcher = await subscribe(s.api, { url: monitor.url, events: ["operational.subscription.disabled"] });
    monitor.secrets.push(watcher.secret);
    await publish(s.api, { type: "doomed", data: {} });
    await waitFor(async () => (await health(s.api, sub.id)).disabled_reason === "failing", {
      timeoutMs: 10_000,
      what: "auto-disable",
    });
    const disabled = await health(s.api, sub.id);
    expect(disabled).toMatchObject({ active: false, disabled_reason: "failing" });
    await waitFor(() => monitor.received.length === 1, { what: "the disabled event" });
    expect(monitor.received[0]!.json).toMatchObject({
      type: "operational.subscription.disabled",
      data: { subscription_id: sub.id, reason: "failing", response_code: 500 },
    });
    expect(monitor.received[0]!.signatureValid).toBe(true);

    // Its pending delivery stays as it is, unattempted, while disabled.
    const received = rx.received.length;
    await sleep(800);
    expect(rx.received.length).toBe(received);
    // Its retry still comes due: the worker claims it (counting an attempt begun) and, finding the
    // subscription disabled, takes the claim back and parks it in line, where it is left alone (see
    // the next tests). A read at that instant sees one attempt more, so wait for a read with the
    // settled count, and check that same read; an attempt that stayed counted would time out here.
    const pending = await waitFor(
      async () => {
        const [delivery] = await deliveriesOfSubscription(s.api, sub.id);
        return delivery?.attempts === received ? delivery : undefined;
      },
      { what: "the attempts to equal the requests received" },
    );
    expect(pending).toMatchObject({ status: "failed", attempts: received });
    expect(rx.received.length).toBe(received);
    // New events do not reach it (it is inactive).
    await publish(s.api, { type: "doomed", data: {} });
    expect(await deliveriesOfSubscription(s.api, sub.id)).toHaveLength(1);
  });

  it("disables a subscription at once on 410 Gone", async ({ stack, receiver }) => {
    const s = await stack({ RETRY_SCHEDULE: "100ms" });
    const rx = await receiver(() => ({ status: 410 }));
    const monitor = await receiver();
    const sub = await subscribe(s.api, { url: rx.url, events: ["gone"] });
    const watcher = await subscribe(s.api, { url: monitor.url, events: ["operational.subscription.disabled"] });
    monitor.secrets.push(watcher.secret);
    await publish(s.api, { type: "gone", data: {} });
    await waitFor(() => monitor.received.length === 1, { what: "the disabled event" });
    expect(monitor.received[0]!.json.data).toMatchObject({
      subscription_id: sub.id,
      reason: "gone",
      response_code: 410,
    });
    expect(monitor.received[0]!.signatureValid).toBe(true);
    expect(await health(s.api, sub.id)).toMatchObject({ active: false, disabled_reason: "gone" });
    expect(rx.received).toHaveLength(1);
  });

  it("leaves a disabled subscription's waiting deliveries unclaimed, and sends them once it is enabled again", async ({
    database,
    inProcessWorker,
    receiver,
    defer,
  }) => {
    const env = testEnv(database.url, { RETRY_SCHEDULE: "100ms" });
    const api = await startTestApi(loadConfig(env));
    defer(() => api.close());
    let gone = true;
    const rx = await receiver(() => (gone ? { status: 410 } : { status: 200 }));
    const sub = await subscribe(api, { url: rx.url, events: ["gone.then.back"], max_in_flight: 1 });
    // All four are created before any worker runs: once the first is answered 410, the
    // subscription is inactive and would get no delivery of an event published after.
    for (let i = 0; i < 4; i++) await publish(api, { type: "gone.then.back", data: { i } });
    const worker = await inProcessWorker(env);
    await waitFor(async () => (await health(api, sub.id)).disabled_reason === "gone", { what: "disabled on 410" });

    // The other three wait in its line, each claimed at most once and found disabled.
    const { gate } = gateOf(env, defer);
    await waitFor(async () => (await gate.lineLength(sub.id)) === 3, { what: "three deliveries in line" });
    // Nothing is in flight and nobody holds a turn, yet the reconciler's nudge (every 500 ms here)
    // wakes nobody: each wake would be a claim taken back at once, for as long as it stays disabled.
    for (let pass = 0; pass < 3; pass++) {
      expect(await worker.reconciler.nudgeLines()).toBe(0);
      await sleep(300);
    }
    const waiting = (await deliveriesOfSubscription(api, sub.id)).filter((d) => d.attempts === 0);
    expect(waiting.map((d) => d.status)).toEqual(["queued", "queued", "queued"]);
    expect(rx.received).toHaveLength(1);

    // Enabled again: the line drains, one at a time (max_in_flight 1), nothing lost.
    gone = false;
    const enabled = await api.call("PUT", `/v1/subscriptions/${sub.id}`, { json: { active: true } });
    expect(enabled).toMatchObject({ status: 200, body: { active: true, disabled_reason: null } });
    await waitFor(
      async () => (await deliveriesOfSubscription(api, sub.id)).filter((d) => d.status === "delivered").length === 3,
      {
        timeoutMs: 10_000,
        what: "the three waiting deliveries delivered",
      },
    );
    expect(rx.received).toHaveLength(4);
    expect(await gate.lineLength(sub.id)).toBe(0);
  });

  it("sends a disabled subscription's waiting deliveries once it is deleted (it can never be enabled again)", async ({
    database,
    inProcessWorker,
    receiver,
    defer,
  }) => {
    const env = testEnv(database.url, { RETRY_SCHEDULE: "100ms" });
    const api = await startTestApi(loadConfig(env));
    defer(() => api.close());
    let gone = true;
    const rx = await receiver(() => (gone ? { status: 410 } : { status: 200 }));
    const sub = await subscribe(api, { url: rx.url, events: ["gone.then.deleted"], max_in_flight: 1 });
    for (let i = 0; i < 4; i++) await publish(api, { type: "gone.then.deleted", data: { i } });
    await inProcessWorker(env);
    await waitFor(async () => (await health(api, sub.id)).disabled_reason === "gone", { what: "disabled on 410" });
    const { gate } = gateOf(env, defer);
    await waitFor(async () => (await gate.lineLength(sub.id)) === 3, { what: "three deliveries in line" });

    // Deleted deliveries of a subscription go out as planned (docs/api.md#delete-a-subscription); a
    // disabled one's would otherwise wait for an enable that can no longer come.
    gone = false;
    expect(await api.call("DELETE", `/v1/subscriptions/${sub.id}`)).toMatchObject({ status: 200 });
    await waitFor(
      async () => (await deliveriesOfSubscription(api, sub.id)).filter((d) => d.status === "delivered").length === 3,
      {
        timeoutMs: 10_000,
        what: "the three waiting deliveries delivered",
      },
    );
    expect(rx.received).toHaveLength(4);
    expect(await gate.lineLength(sub.id)).toBe(0);
  });
});
