import { publish, subscribe, type TestApi } from "@webhooks/api/testing";
import { createApiKey } from "@webhooks/db";
import { sql, waitFor } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { attemptListSchema, deliveryListSchema, deliverySchema } from "../src/deliveries/schemas.ts";
import { eventSchema } from "../src/events/schemas.ts";
import { recoverySchema } from "../src/subscriptions/schemas.ts";
import { deliveringApiTest } from "./fixtures.ts";

/**
 * Payload erasure through the API (docs/api.md#erase-an-events-payload), with a worker delivering
 * to a real receiver: the payload goes, the metadata stays, nothing of it is sent again.
 */
const test = deliveringApiTest();

async function deliveriesOf(api: TestApi, subscriptionId: string) {
  const page = await api.get(`/v1/deliveries?subscription_id=${subscriptionId}&limit=100`, 200, {
    schema: deliveryListSchema,
  });
  return page.body.data;
}

describe("DELETE /v1/events/{id}/payload", () => {
  test("erases the payload, keeps the metadata, and is idempotent", async ({ api, receiver, database }) => {
    const sub = await subscribe(api, { url: `${receiver.url}/kept`, events: ["card.saved"] });
    const event = await publish(api, { type: "card.saved", data: { card: "4242 4242 4242 4242" } });
    expect(event.payload_deleted_at).toBeNull();
    const [delivered] = await waitFor(async () => {
      const list = await deliveriesOf(api, sub.id);
      return list[0]?.status === "delivered" ? list : undefined;
    });

    const erased = await api.delete(`/v1/events/${event.id}/payload`, 200, { schema: eventSchema });
    expect(erased.body).toEqual({ ...event, data: null, payload_deleted_at: expect.any(String) });
    const erasedAt = erased.body.payload_deleted_at!;
    expect(Date.parse(erasedAt)).toBeGreaterThanOrEqual(Date.parse(event.created_at));
    expect((await api.get(`/v1/events/${event.id}`, 200, { schema: eventSchema })).body).toEqual(erased.body);
    // Again: the same answer, the first erasure's time.
    expect((await api.delete(`/v1/events/${event.id}/payload`, 200, { schema: eventSchema })).body).toEqual(
      erased.body,
    );
    const [stored] = await sql<{ data: unknown }>(database.url, "SELECT data FROM events WHERE id = $1", [event.id]);
    expect(stored).toEqual({ data: null });

    // The delivery and its attempt keep their metadata; a delivered one has no failure reason.
    const read = await api.get(`/v1/deliveries/${delivered!.id}`, 200, { schema: deliverySchema });
    expect(read.body).toEqual(delivered);
    expect(read.body.failure_reason).toBeUndefined();
    const attempts = await api.get(`/v1/deliveries/${delivered!.id}/attempts`, 200, { schema: attemptListSchema });
    expect(attempts.body.data).toHaveLength(1);
    expect(attempts.body.data[0]).toMatchObject({ number: 1, response_code: 200 });

    // Nothing is left to send.
    const resend = await api.post(`/v1/deliveries/${delivered!.id}/retry`, {}, 409);
    expect(resend.body.error).toMatchObject({ type: "invalid_request_error", code: "payload_deleted" });
    expect(resend.body.error.message).toContain(event.id);
    expect((await api.get(`/v1/deliveries/${delivered!.id}`, 200, { schema: deliverySchema })).body.status).toBe(
      "delivered",
    );
  });

  test("ends the deliveries still to be sent as failed, payload_deleted, and sends none of them", async ({
    api,
    receiver,
  }) => {
    // One attempt at a time, and a slow answer: the first event's delivery holds the second's back.
    let release = false;
    receiver.reply = (webhook) =>
      webhook.path === "/slow" && !release ? { status: 200, delayMs: 1_500 } : { status: 200 };
    const sub = await subscribe(api, { url: `${receiver.url}/slow`, events: ["slow.thing"], max_in_flight: 1 });
    const first = await publish(api, { type: "slow.thing", data: { n: 1 } });
    const second = await publish(api, { type: "slow.thing", data: { n: 2 } });
    await waitFor(() => receiver.received.some((webhook) => webhook.path === "/slow"));

    await api.delete(`/v1/events/${second.id}/payload`, 200, { schema: eventSchema });
    const ended = await waitFor(async () => {
      const list = await deliveriesOf(api, sub.id);
      const delivery = list.find((d) => d.event_id === second.id);
      return delivery?.status === "failed" ? delivery : undefined;
    });
    expect(ended).toMatchObject({
      status: "failed",
      attempts: 0,
      next_retry_at: null,
      failure_reason: "payload_deleted",
    });
    release = true;
    await waitFor(
      async () => (await deliveriesOf(api, sub.id)).find((d) => d.event_id === first.id)?.status === "delivered",
    );
    // Give the worker a chance to (wrongly) send the second one: one more event goes through after it.
    const third = await publish(api, { type: "slow.thing", data: { n: 3 } });
    await waitFor(() => receiver.received.some((webhook) => webhook.path === "/slow" && webhook.json.data.n === 3));
    expect(
      receiver.received.filter((webhook) => webhook.path === "/slow").map((webhook) => webhook.json.data.n),
    ).toEqual([1, 3]);
    expect(third.id).not.toBe(second.id);
    const resend = await api.post(`/v1/deliveries/${ended.id}/retry`, {}, 409);
    expect(resend.body.error.code).toBe("payload_deleted");
  });

  test("a worker that claims a delivery whose payload is gone ends it without sending", async ({
    api,
    receiver,
    database,
  }) => {
    // A delivery whose attempt was under way when its payload was erased keeps its retry; the
    // worker that claims that retry must end it. Stage that state directly: a failed delivery
    // with a retry due, of an erased event.
    receiver.reply = (webhook) => (webhook.path === "/flaky" ? { status: 503 } : { status: 200 });
    const sub = await subscribe(api, { url: `${receiver.url}/flaky`, events: ["flaky.thing"] });
    await sql(database.url, "UPDATE subscriptions SET max_in_flight = 1 WHERE id = $1", [sub.id]);
    const event = await publish(api, { type: "flaky.thing", data: { secret: "s3cr3t" } });
    await waitFor(() => receiver.received.some((webhook) => webhook.path === "/flaky"));
    const [delivery] = await waitFor(async () => {
      const rows = await sql<{ id: string; attempts: number }>(
        database.url,
        "UPDATE deliveries SET next_attempt_at = now() + interval '2 seconds' WHERE event_id = $1 AND status = 'failed' AND next_attempt_at IS NOT NULL RETURNING id, attempts",
        [event.id],
      );
      return rows.length > 0 ? rows : undefined;
    });
    await sql(database.url, "UPDATE events SET data = NULL, payload_deleted_at = now() WHERE id = $1", [event.id]);
    const sent = receiver.received.filter((webhook) => webhook.path === "/flaky").length;

    const ended = await waitFor(async () => {
      const read = await api.get(`/v1/deliveries/${delivery!.id}`, 200, { schema: deliverySchema });
      return read.body.next_retry_at === null ? read.body : undefined;
    });
    expect(ended).toMatchObject({ status: "failed", attempts: delivery!.attempts, failure_reason: "payload_deleted" });
    const attempts = await api.get(`/v1/deliveries/${delivery!.id}/attempts`, 200, { schema: attemptListSchema });
    expect(attempts.body.data).toHaveLength(delivery!.attempts);
    expect(receiver.received.filter((webhook) => webhook.path === "/flaky")).toHaveLength(sent);
  });

  test("recovering a subscription skips the deliveries whose payload is gone", async ({ api, receiver }) => {
    // 400: fails every attempt without counting against the endpoint's health.
    receiver.reply = (webhook) => (webhook.path === "/refusing" ? { status: 400 } : { status: 200 });
    const sub = await subscribe(api, { url: `${receiver.url}/refusing`, events: ["gone.thing"] });
    const kept = await publish(api, { type: "gone.thing", data: { n: 1 } });
    const erased = await publish(api, { type: "gone.thing", data: { n: 2 } });
    await waitFor(async () => {
      const list = await deliveriesOf(api, sub.id);
      return list.length === 2 && list.every((d) => d.status === "failed" && d.next_retry_at === null);
    });
    await api.delete(`/v1/events/${erased.id}/payload`, 200, { schema: eventSchema });
    receiver.reply = () => ({ status: 200 });
    const recovery = await api.post(
      `/v1/subscriptions/${sub.id}/recover`,
      { since: new Date(Date.parse(kept.created_at) - 60_000).toISOString() },
      202,
      { schema: recoverySchema },
    );
    expect(recovery.body.deliveries).toBe(1);
    const list = await waitFor(async () => {
      const all = await deliveriesOf(api, sub.id);
      return all.find((d) => d.event_id === kept.id)?.status === "delivered" ? all : undefined;
    });
    expect(list.find((d) => d.event_id === erased.id)).toMatchObject({ status: "failed" });
  });

  test("a tenant's key erases only its tenant's events; an unknown id is a 404", async ({ api }) => {
    const { key } = await createApiKey({ db: api.db }, { name: "erasure tenant", tenantId: "t_erase" });
    const own = await publish(api, { type: "t.thing", data: { n: 1 }, tenant_id: "t_erase" });
    const other = await publish(api, { type: "t.thing", data: { n: 2 }, tenant_id: "t_other" });
    const mine = await api.delete(`/v1/events/${own.id}/payload`, 200, { key, schema: eventSchema });
    expect(mine.body).toMatchObject({ id: own.id, data: null, tenant_id: "t_erase" });
    const refused = await api.delete(`/v1/events/${other.id}/payload`, 404, { key });
    expect(refused.body.error).toMatchObject({ code: "resource_missing", param: "event_id" });
    expect((await api.get(`/v1/events/${other.id}`, 200, { schema: eventSchema })).body).toMatchObject({
      data: { n: 2 },
      payload_deleted_at: null,
    });
    await api.delete("/v1/events/evt_01JD5V6Y7Z8X9W0V1U2T3S4R5Q/payload", 404);
    await api.delete("/v1/events/not-an-id/payload", 404);
  });
});
