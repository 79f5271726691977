import { type ReceivedWebhook, waitFor } from "@webhooks/testing";
import { Webhook } from "standardwebhooks";
import { describe, expect } from "vitest";
import { workerTest as it } from "./fixtures.ts";
import { publish, type Stack, subscribe } from "./stack.ts";

// Self-service operations (docs/api.md#subscriptions) end to end: the API, a worker and real
// receivers on loopback.

/** Whether the official standardwebhooks package accepts the webhook with this secret. */
function verifies(secret: string, webhook: ReceivedWebhook): boolean {
  try {
    new Webhook(secret).verify(webhook.body, {
      "webhook-id": String(webhook.headers["webhook-id"]),
      "webhook-timestamp": String(webhook.headers["webhook-timestamp"]),
      "webhook-signature": String(webhook.headers["webhook-signature"]),
    });
    return true;
  } catch {
    return false;
  }
}

/**
 * The subscription's newest invoice.paid delivery once it waits in line, queued with no attempt.
 * The test's delivery ending wakes the head of the line, which is claimed (an attempt begun in the
 * log) and taken back unsent when its claim finds the subscription disabled: a moment to wait out.
 * An attempt really made, or one left open, keeps `attempts` above 0 and this times out.
 */
async function waitingUnattempted(api: Stack["api"], subscriptionId: string) {
  return waitFor(
    async () => {
      const [delivery] = (
        await api.call("GET", `/v1/deliveries?subscription_id=${subscriptionId}&event=invoice.paid&limit=1`)
      ).body.data;
      return delivery?.status === "queued" && delivery.attempts === 0 ? delivery : undefined;
    },
    { timeoutMs: 5_000, what: "the waiting delivery queued, unattempted" },
  );
}

const signatureCount = (webhook: ReceivedWebhook) => String(webhook.headers["webhook-signature"]).split(" ").length;

describe("secret rotation", () => {
  it("signs with both secrets during the overlap, deliveries created before it too, then with the new one only", async ({
    stack,
    receiver,
  }) => {
    const s = await stack({ RETRY_SCHEDULE: "1500ms,1500ms,1500ms" });
    // The first request of the first event fails, so its retry comes after the rotation.
    const rx = await receiver((_webhook, index) => ({ status: index === 0 ? 500 : 200 }));
    const sub = await subscribe(s.api, { url: `${rx.url}/hooks`, events: ["*"] });
    const before = (await publish(s.api, { type: "invoice.paid", data: { n: 1 } })).id;
    await waitFor(() => rx.received.length >= 1, { what: "the first attempt" });
    expect(signatureCount(rx.received[0]!)).toBe(1);
    expect(verifies(sub.secret, rx.received[0]!)).toBe(true);

    const rotated = await s.api.call("POST", `/v1/subscriptions/${sub.id}/rotate_secret`, { json: { overlap: "4s" } });
    expect(rotated.status).toBe(200);
    const fresh: string = rotated.body.secret;
    const during = (await publish(s.api, { type: "invoice.paid", data: { n: 2 } })).id;

    // The retry of the delivery created before the rotation, and the new delivery: both signatures.
    const retried = await waitFor(() => rx.received.find((w, i) => i > 0 && w.headers["webhook-id"] === before), {
      what: "the retry",
    });
    const duringOverlap = await waitFor(() => rx.received.find((w) => w.headers["webhook-id"] === during), {
      what: "the delivery during the overlap",
    });
    for (const webhook of [retried, duringOverlap]) {
      expect(signatureCount(webhook)).toBe(2);
      expect(verifies(fresh, webhook)).toBe(true);
      expect(verifies(sub.secret, webhook)).toBe(true);
      // The new signature comes first.
      expect(String(webhook.headers["webhook-signature"]).split(" ")[0]).toBe(
        new Webhook(fresh).sign(
          String(webhook.headers["webhook-id"]),
          new Date(Number(webhook.headers["webhook-timestamp"]) * 1000),
          webhook.body,
        ),
      );
    }

    // After the overlap: the new secret only.
    await new Promise((resolve) => setTimeout(resolve, 4_500));
    const after = (await publish(s.api, { type: "invoice.paid", data: { n: 3 } })).id;
    const afterOverlap = await waitFor(() => rx.received.find((w) => w.headers["webhook-id"] === after), {
      what: "the delivery after the overlap",
    });
    expect(signatureCount(afterOverlap)).toBe(1);
    expect(verifies(fresh, afterOverlap)).toBe(true);
    expect(verifies(sub.secret, afterOverlap)).toBe(false);
  });

  it("with overlap 0s signs with the new secret only at once", async ({ stack, receiver }) => {
    const s = await stack();
    const rx = await receiver();
    const sub = await subscribe(s.api, { url: `${rx.url}/hooks`, events: ["*"] });
    const rotated = await s.api.call("POST", `/v1/subscriptions/${sub.id}/rotate_secret`, { json: { overlap: "0s" } });
    const eventId = (await publish(s.api, { type: "invoice.paid", data: {} })).id;
    const webhook = await waitFor(() => rx.received.find((w) => w.headers["webhook-id"] === eventId), {
      what: "the delivery",
    });
    expect(signatureCount(webhook)).toBe(1);
    expect(verifies(rotated.body.secret, webhook)).toBe(true);
    expect(verifies(sub.secret, webhook)).toBe(false);
  });
});

describe("test events", () => {
  it("reach a paused subscription that does not list the type, and no other subscription", async ({
    stack,
    receiver,
  }) => {
    const s = await stack();
    const rx = await receiver();
    const paused = await subscribe(s.api, { url: `${rx.url}/paused`, events: ["invoice.paid"] });
    await s.api.call("PUT", `/v1/subscriptions/${paused.id}`, { json: { active: false } });
    const everything = await subscribe(s.api, { url: `${rx.url}/everything`, events: ["*"] });
    expect(everything.id).not.toBe(paused.id);

    const response = await s.api.call("POST", `/v1/subscriptions/${paused.id}/test`, {
      json: { type: "customer.updated", data: { probe: true } },
    });
    expect(response.status).toBe(202);
    expect(response.body).toMatchObject({
      object: "delivery",
      subscription_id: paused.id,
      event: "customer.updated",
      status: "queued",
    });
    await waitFor(
      async () => (await s.api.call("GET", `/v1/deliveries/${response.body.id}`)).body.status === "delivered",
      { what: "delivered" },
    );
    // Time for a stray delivery to the other subscription to arrive, if there were one.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(rx.received.map((w) => w.path)).toEqual(["/paused"]);
    expect(rx.received[0]!.json).toMatchObject({ type: "customer.updated", data: { probe: true } });
    expect(verifies(paused.secret, rx.received[0]!)).toBe(true);
  });

  it("reach a subscription the service disabled, whose other deliveries keep waiting until it is enabled", async ({
    stack,
    receiver,
  }) => {
    const s = await stack({ RETRY_SCHEDULE: "200ms" });
    // The endpoint answers its first request 410 (gone), a second later, which disables the
    // subscription at once; by then it is mended. One attempt at a time: the second event is
    // published while the first is in flight (not before: the two could then go in either order),
    // and its delivery waits.
    const rx = await receiver((_webhook, index) => (index === 0 ? { status: 410, delayMs: 1_000 } : { status: 200 }));
    const sub = await subscribe(s.api, { url: `${rx.url}/hooks`, events: ["invoice.paid"], max_in_flight: 1 });
    await publish(s.api, { type: "invoice.paid", data: { n: 1 } });
    await waitFor(() => rx.concurrent === 1, { what: "the first delivery in flight" });
    const waiting = await publish(s.api, { type: "invoice.paid", data: { n: 2 } });
    await waitFor(
      async () => (await s.api.call("GET", `/v1/subscriptions/${sub.id}`)).body.disabled_reason === "gone",
      { what: "disabled" },
    );
    expect(rx.received[0]!.json).toMatchObject({ data: { n: 1 } });

    // The owner checks the mended endpoint before enabling the subscription again.
    const test = await s.api.call("POST", `/v1/subscriptions/${sub.id}/test`);
    expect(test.status).toBe(202);
    await waitFor(async () => (await s.api.call("GET", `/v1/deliveries/${test.body.id}`)).body.status === "delivered", {
      timeoutMs: 5_000,
      what: "the test delivered",
    });
    expect(rx.received.map((w) => w.json.type)).toEqual(["invoice.paid", "webhook.test"]);
    expect(verifies(sub.secret, rx.received[1]!)).toBe(true);
    // Still disabled, and the event published meanwhile still waits, unattempted.
    expect((await s.api.call("GET", `/v1/subscriptions/${sub.id}`)).body).toMatchObject({
      active: false,
      disabled_reason: "gone",
    });
    expect(await waitingUnattempted(s.api, sub.id)).toMatchObject({ event_id: waiting.id });

    // Enabled again: it goes.
    await s.api.call("PUT", `/v1/subscriptions/${sub.id}`, { json: { active: true } });
    await waitFor(() => rx.received.length === 3, { timeoutMs: 5_000, what: "the waiting delivery" });
    expect(rx.received[2]!.json).toMatchObject({ type: "invoice.paid", data: { n: 2 } });
  });

  it("take a slot like any attempt, within max_in_flight, also to a disabled subscription", async ({
    stack,
    receiver,
  }) => {
    const s = await stack({ WORKER_CONCURRENCY: "10", RETRY_SCHEDULE: "1h" });
    let gone = true;
    const rx = await receiver(() => (gone ? { status: 410 } : { status: 200, delayMs: 500 }));
    const sub = await subscribe(s.api, { url: `${rx.url}/hooks`, events: ["invoice.paid"], max_in_flight: 1 });
    await publish(s.api, { type: "invoice.paid", data: {} });
    await waitFor(
      async () => (await s.api.call("GET", `/v1/subscriptions/${sub.id}`)).body.disabled_reason === "gone",
      { what: "disabled" },
    );
    gone = false;
    for (let i = 0; i < 3; i++) expect((await s.api.call("POST", `/v1/subscriptions/${sub.id}/test`)).status).toBe(202);
    await waitFor(() => rx.received.length === 4, { timeoutMs: 10_000, what: "the three tests" });
    // One at a time (max_in_flight 1), each woken by the one before: no fallback timer.
    expect(rx.maxConcurrent).toBe(1);
  });

  it("go ahead of the line, and still go when the subscription is disabled while one waits there", async ({
    stack,
    receiver,
  }) => {
    const s = await stack({ RETRY_SCHEDULE: "1h" });
    // The first delivery is in flight a second and gets 410; one more event and a test wait behind
    // it. The endpoint is mended by then: it answers the next request 200.
    const rx = await receiver((_webhook, index) => (index === 0 ? { status: 410, delayMs: 1_000 } : { status: 200 }));
    const sub = await subscribe(s.api, { url: `${rx.url}/hooks`, events: ["invoice.paid"], max_in_flight: 1 });
    await publish(s.api, { type: "invoice.paid", data: { n: 1 } });
    await waitFor(() => rx.concurrent === 1, { what: "the first delivery in flight" });
    await publish(s.api, { type: "invoice.paid", data: { n: 2 } });
    await new Promise((resolve) => setTimeout(resolve, 200));
    const test = await s.api.call("POST", `/v1/subscriptions/${sub.id}/test`);
    await waitFor(
      async () => (await s.api.call("GET", `/v1/subscriptions/${sub.id}`)).body.disabled_reason === "gone",
      { what: "disabled" },
    );

    await waitFor(async () => (await s.api.call("GET", `/v1/deliveries/${test.body.id}`)).body.status === "delivered", {
      timeoutMs: 5_000,
      what: "the test delivered",
    });
    // The event published before it still waits, for the owner to enable the subscription.
    expect(rx.received.map((w) => w.json.type)).toEqual(["invoice.paid", "webhook.test"]);
    await waitingUnattempted(s.api, sub.id);
  });
});

describe("custom headers", () => {
  it("go out with every attempt under the signature headers, and a later PUT leaves a pending delivery's alone", async ({
    stack,
    receiver,
  }) => {
    const s = await stack({ RETRY_SCHEDULE: "1500ms,1500ms,1500ms" });
    const rx = await receiver((_webhook, index) => ({ status: index === 0 ? 503 : 200 }));
    const created = await s.api.call("POST", "/v1/subscriptions", {
      json: { url: `${rx.url}/hooks`, events: ["*"], headers: { Authorization: "Bearer t-1", "X-Tenant": "acme" } },
    });
    expect(created.status).toBe(201);
    const secret: string = created.body.secret;
    const first = (await publish(s.api, { type: "invoice.paid", data: {} })).id;
    await waitFor(() => rx.received.length >= 1, { what: "the first attempt" });
    const updated = await s.api.call("PUT", `/v1/subscriptions/${created.body.id}`, {
      json: { headers: { "X-Tenant": "globex" } },
    });
    expect(updated.status).toBe(200);

    const retry = await waitFor(() => rx.received.find((w, i) => i > 0 && w.headers["webhook-id"] === first), {
      what: "the retry",
    });
    for (const webhook of [rx.received[0]!, retry]) {
      expect(webhook.headers.authorization).toBe("Bearer t-1");
      expect(webhook.headers["x-tenant"]).toBe("acme");
      expect(webhook.headers["content-type"]).toBe("application/json");
      expect(verifies(secret, webhook)).toBe(true);
    }

    const second = (await publish(s.api, { type: "invoice.paid", data: {} })).id;
    const later = await waitFor(() => rx.received.find((w) => w.headers["webhook-id"] === second), {
      what: "the delivery after the PUT",
    });
    expect(later.headers["x-tenant"]).toBe("globex");
    expect(later.headers.authorization).toBeUndefined();
    expect(verifies(secret, later)).toBe(true);
  });
});
