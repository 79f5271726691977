import type { TestApi } from "@webhooks/api/testing";
import { type TestReceiver, waitFor } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { workerTest as it } from "./fixtures.ts";
import { publish, subscribe } from "./stack.ts";

/**
 * A manual resend, a recover or a test event to a subscription whose circuit is open goes at once
 * as the probe (docs/api.md#circuit-breaker): a success closes the circuit and the
 * deliveries waiting behind it follow; a failure keeps it open and counts once. A Retry-After
 * the endpoint asked for is still honoured. The circuit's own probe is an hour away, and so are
 * the retries and the reconciler's next pass: whatever arrives was sent because of the action.
 */
const SETTINGS = {
  CIRCUIT_FAILURE_THRESHOLD: "2",
  CIRCUIT_PROBE_INTERVAL: "1h",
  RETRY_SCHEDULE: "1h",
  RECONCILE_INTERVAL: "1h",
};

interface OpenCircuit {
  api: TestApi;
  rx: TestReceiver;
  subscriptionId: string;
  /** The two deliveries whose failures opened the circuit, then the two that wait behind it. */
  failed: string[];
  waiting: string[];
  /** Makes the receiver answer 200 from now on. */
  fix(): void;
}

/** A receiver that answers 500 (or `failure`) until fixed; four events, the first two of which open the circuit. */
async function openCircuit(
  stack: (overrides: Record<string, string>) => Promise<{ api: TestApi }>,
  receiver: (reply: TestReceiver["reply"]) => Promise<TestReceiver>,
  options: { overrides?: Record<string, string>; failure?: { status: number; headers?: Record<string, string> } } = {},
): Promise<OpenCircuit> {
  const { api } = await stack({ ...SETTINGS, ...options.overrides });
  let fixed = false;
  const rx = await receiver(() => (fixed ? { status: 200 } : (options.failure ?? { status: 500 })));
  const sub = await subscribe(api, { url: rx.url, events: ["probe.me"], max_in_flight: 1 });
  rx.secrets.push(sub.secret);
  const ids: string[] = [];
  for (let i = 0; i < 2; i++) {
    ids.push((await publish(api, { type: "probe.me", data: { i } })).id);
    await waitFor(() => rx.received.length === i + 1, { what: `failure ${i + 1}` });
  }
  await waitFor(async () => (await health(api, sub.id)).state === "circuit_open", { what: "the circuit open" });
  for (let i = 2; i < 4; i++) ids.push((await publish(api, { type: "probe.me", data: { i } })).id);
  const deliveries = await waitFor(
    async () => {
      const all = await deliveriesOf(api, sub.id);
      // The failures recorded, and the two others parked behind the circuit, unattempted.
      return all.length === 4 && all.filter((d) => d.status === "failed").length === 2 ? all : undefined;
    },
    { what: "two failed and two waiting" },
  );
  const byEvent = (eventId: string) => deliveries.find((d) => d.event_id === eventId)!.id as string;
  return {
    api,
    rx,
    subscriptionId: sub.id,
    failed: ids.slice(0, 2).map(byEvent),
    waiting: ids.slice(2).map(byEvent),
    fix: () => {
      fixed = true;
    },
  };
}

async function health(api: TestApi, subscriptionId: string): Promise<Record<string, any>> {
  return (await api.call("GET", `/v1/subscriptions/${subscriptionId}`)).body.health;
}

async function deliveriesOf(api: TestApi, subscriptionId: string): Promise<Record<string, any>[]> {
  return (await api.call("GET", `/v1/deliveries?limit=100&subscription_id=${subscriptionId}`)).body.data;
}

async function statusOf(api: TestApi, deliveryId: string): Promise<string> {
  return (await api.call("GET", `/v1/deliveries/${deliveryId}`)).body.status;
}

/** The circuit closed and every delivery in `ids` delivered, within seconds (the next probe is an hour away). */
async function expectDrained(c: OpenCircuit, ids: string[]): Promise<void> {
  await waitFor(async () => (await Promise.all(ids.map((id) => statusOf(c.api, id)))).every((s) => s === "delivered"), {
    timeoutMs: 15_000,
    what: "the deliveries delivered",
  });
  expect(await health(c.api, c.subscriptionId)).toMatchObject({
    state: "healthy",
    consecutive_failures: 0,
    retry_at: null,
  });
}

describe("an explicit action on a subscription whose circuit is open", () => {
  it("a manual resend goes at once as the probe; its success closes the circuit and the waiting deliveries follow", async ({
    stack,
    receiver,
  }) => {
    const c = await openCircuit(stack, receiver);
    c.fix();
    expect((await c.api.call("POST", `/v1/deliveries/${c.failed[0]}/retry`)).status).toBe(202);
    await expectDrained(c, [c.failed[0]!, ...c.waiting]);
    // The other failure still waits for its retry, an hour away: only what was resent, and what
    // waited behind the circuit, went.
    expect(await statusOf(c.api, c.failed[1]!)).toBe("failed");
    expect(c.rx.received).toHaveLength(2 + 3);
  });

  it("a recover goes at once, its first delivery the probe, and everything it resent follows", async ({
    stack,
    receiver,
  }) => {
    const c = await openCircuit(stack, receiver);
    c.fix();
    const recovery = await c.api.call("POST", `/v1/subscriptions/${c.subscriptionId}/recover`, {
      json: { since: "2020-01-01T00:00:00Z" },
    });
    expect(recovery).toMatchObject({ status: 202, body: { deliveries: 2 } });
    await expectDrained(c, [...c.failed, ...c.waiting]);
  });

  it("a test event goes at once as the probe, and the waiting deliveries follow its success", async ({
    stack,
    receiver,
  }) => {
    const c = await openCircuit(stack, receiver);
    c.fix();
    const test = await c.api.call("POST", `/v1/subscriptions/${c.subscriptionId}/test`);
    expect(test.status).toBe(202);
    await expectDrained(c, [test.body.id, ...c.waiting]);
    expect(c.rx.received.at(2)?.json.type).toBe("webhook.test");
  });

  it("a resend to an endpoint still failing is sent once, keeps the circuit open and counts one failure", async ({
    stack,
    receiver,
  }) => {
    const c = await openCircuit(stack, receiver);
    const before = await health(c.api, c.subscriptionId);
    const resentAt = Date.now();
    expect((await c.api.call("POST", `/v1/deliveries/${c.failed[0]}/retry`)).status).toBe(202);
    await waitFor(() => c.rx.received.length === 3, { what: "the resend sent" });
    const after = await waitFor(
      async () => {
        const current = await health(c.api, c.subscriptionId);
        return current.consecutive_failures > before.consecutive_failures ? current : undefined;
      },
      { what: "the failure recorded" },
    );
    expect(after).toMatchObject({ state: "circuit_open", consecutive_failures: before.consecutive_failures + 1 });
    // The next probe is an interval after this failure.
    expect(Date.parse(after.retry_at) - resentAt).toBeGreaterThan(50 * 60_000);
    // Nothing else went: the deliveries behind the circuit wait for the next probe.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(c.rx.received).toHaveLength(3);
    expect(await Promise.all(c.waiting.map((id) => statusOf(c.api, id)))).toEqual(["queued", "queued"]);
  });

  it("still honours a Retry-After the endpoint asked for: the probe goes at its end, not at once, nor an interval later", async ({
    stack,
    receiver,
  }) => {
    // Each failure is a 503 asking for 3 s: the circuit opens, held an hour for its next probe.
    const c = await openCircuit(stack, receiver, {
      failure: { status: 503, headers: { "retry-after": "3" } },
    });
    const askedAt = c.rx.received[1]!.receivedAt;
    c.fix();
    expect((await c.api.call("POST", `/v1/deliveries/${c.failed[0]}/retry`)).status).toBe(202);
    await expectDrained(c, [c.failed[0]!, ...c.waiting]);
    expect(c.rx.received[2]!.receivedAt - askedAt).toBeGreaterThanOrEqual(2_900);
  });
});
