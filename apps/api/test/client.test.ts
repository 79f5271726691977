import type { TestApi } from "@webhooks/api/testing";
import {
  type Delivery,
  type Event,
  type SubscriptionWithSecret,
  verifyWebhook,
  WebhookVerificationError,
} from "@webhooks/client";
import { type TestReceiver, waitFor } from "@webhooks/testing";
import { describe, expect } from "vitest";
import {
  answered,
  client,
  openApiDocument,
  receiverAnswers,
  requestIds,
  clientTest as test,
} from "./client-fixtures.ts";

/**
 * packages/client against the real API on loopback, with a worker delivering to a real receiver:
 * every operation of the OpenAPI document is called through the typed client, and the last test
 * fails if the document has an operation this file does not exercise. How errors reach a client
 * is in client-errors.test.ts.
 */

describe("the typed client (packages/client), on every operation", () => {
  let subscription: SubscriptionWithSecret & { secret: string };
  let event: Event;
  let delivery: Delivery;

  test("createSubscription: 201 with the secret, defaults for omitted fields; 400 names the parameter", async ({
    api,
    receiver,
  }) => {
    // active, description, max_in_flight and rate_limit are optional in the generated types.
    const { data, error, response } = await client(api).POST("/v1/subscriptions", {
      body: { url: `${receiver.url}/webhooks`, events: ["invoice.paid"] },
    });
    expect(error).toBeUndefined();
    expect(response.status).toBe(201);
    expect(data).toMatchObject({
      object: "subscription",
      url: `${receiver.url}/webhooks`,
      events: ["invoice.paid"],
      description: "",
      active: true,
      rate_limit: null,
    });
    expect(data!.secret).toMatch(/^whsec_/);
    subscription = { ...data!, secret: data!.secret! };

    const invalid = await client(api).POST("/v1/subscriptions", {
      body: { url: `${receiver.url}/webhooks`, events: [] },
    });
    expect(invalid.response.status).toBe(400);
    expect(invalid.data).toBeUndefined();
    expect(invalid.error?.error).toMatchObject({
      type: "invalid_request_error",
      code: "parameter_invalid",
      param: "events",
    });
  });

  test("getSubscription: 200 without the secret; 404 for an unknown id", async ({ api, receiver }) => {
    const { data, response } = await client(api).GET("/v1/subscriptions/{subscription_id}", {
      params: { path: { subscription_id: subscription.id } },
    });
    expect(response.status).toBe(200);
    const { secret: _secret, ...withoutSecret } = subscription;
    expect(data).toEqual(withoutSecret);

    const missing = await client(api).GET("/v1/subscriptions/{subscription_id}", {
      params: { path: { subscription_id: "sub_01JD5V6Y7Z8X9W0V1U2T3S4R5Q" } },
    });
    expect(missing.response.status).toBe(404);
    expect(missing.error?.error.code).toBe("resource_missing");
  });

  test("listSubscriptions: 200, a page of the given size with has_more", async ({ api, receiver }) => {
    const other = await client(api).POST("/v1/subscriptions", {
      body: { url: "https://example.com/hooks", events: ["*"], active: false },
    });
    expect(other.response.status).toBe(201);
    const { data, response } = await client(api).GET("/v1/subscriptions", { params: { query: { limit: 1 } } });
    expect(response.status).toBe(200);
    expect(data).toMatchObject({ object: "list", url: "/v1/subscriptions", has_more: true });
    expect(data!.data.map((s) => s.id)).toEqual([other.data!.id]);
    const next = await client(api).GET("/v1/subscriptions", {
      params: { query: { limit: 1, starting_after: other.data!.id } },
    });
    expect(next.data!.data.map((s) => s.id)).toEqual([subscription.id]);
    expect(next.data!.has_more).toBe(false);
  });

  test("updateSubscription: 200, only the fields sent change", async ({ api, receiver }) => {
    const { data, response } = await client(api).PUT("/v1/subscriptions/{subscription_id}", {
      params: { path: { subscription_id: subscription.id } },
      body: { events: ["invoice.paid", "invoice.refunded"], rate_limit: 50, ordering: "none" },
    });
    expect(response.status).toBe(200);
    expect(data).toMatchObject({
      id: subscription.id,
      url: subscription.url,
      events: ["invoice.paid", "invoice.refunded"],
      rate_limit: 50,
      active: true,
      ordering: "none",
    });
  });

  test("publishEvent: 202; the same Idempotency-Key replays it (Idempotent-Replayed), with another body it is a 409", async ({
    api,
    receiver,
  }) => {
    const publish = (amount: number) =>
      client(api).POST("/v1/events", {
        params: { header: { "Idempotency-Key": "client-test-in_42" } },
        body: { type: "invoice.paid", data: { invoice: "in_42", amount_due: amount } },
      });
    const first = await publish(4200);
    expect(first.response.status).toBe(202);
    expect(first.response.headers.get("idempotent-replayed")).toBeNull();
    expect(first.data).toMatchObject({
      object: "event",
      type: "invoice.paid",
      data: { invoice: "in_42", amount_due: 4200 },
    });
    expect(first.data!.id).toMatch(/^evt_/);
    event = first.data!;

    const replay = await publish(4200);
    expect(replay.response.status).toBe(202);
    expect(replay.response.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.data).toEqual(event);

    const conflict = await publish(1);
    expect(conflict.response.status).toBe(409);
    expect(conflict.error?.error.type).toBe("idempotency_error");
  });

  test("getEvent: 200; 404 for an unknown id", async ({ api, receiver }) => {
    const { data, response } = await client(api).GET("/v1/events/{event_id}", {
      params: { path: { event_id: event.id } },
    });
    expect(response.status).toBe(200);
    expect(data).toEqual(event);
    const missing = await client(api).GET("/v1/events/{event_id}", {
      params: { path: { event_id: "evt_01JD5V6Y7Z8X9W0V1U2T3S4R5Q" } },
    });
    expect(missing.response.status).toBe(404);
  });

  test("deleteEventPayload: 200 with data null; 404 for an unknown id", async ({ api }) => {
    const published = await client(api).POST("/v1/events", { body: { type: "client.erased", data: { n: 1 } } });
    expect(published.response.status).toBe(202);
    const { data, response } = await client(api).DELETE("/v1/events/{event_id}/payload", {
      params: { path: { event_id: published.data!.id } },
    });
    expect(response.status).toBe(200);
    expect(data).toMatchObject({ id: published.data!.id, data: null, payload_deleted_at: expect.any(String) });
    const missing = await client(api).DELETE("/v1/events/{event_id}/payload", {
      params: { path: { event_id: "evt_01JD5V6Y7Z8X9W0V1U2T3S4R5Q" } },
    });
    expect(missing.response.status).toBe(404);
  });

  test("listDeliveries: 200, filtered by subscription; 400 for a limit out of range", async ({ api, receiver }) => {
    const { data, response } = await client(api).GET("/v1/deliveries", {
      params: { query: { subscription_id: subscription.id, event: "invoice.paid" } },
    });
    expect(response.status).toBe(200);
    expect(data).toMatchObject({ object: "list", url: "/v1/deliveries", has_more: false });
    expect(data!.data).toHaveLength(1);
    expect(data!.data[0]).toMatchObject({
      object: "delivery",
      subscription_id: subscription.id,
      event_id: event.id,
      event: "invoice.paid",
    });
    delivery = data!.data[0]!;

    const outOfRange = await client(api).GET("/v1/deliveries", { params: { query: { limit: 500 } } });
    expect(outOfRange.response.status).toBe(400);
    expect(outOfRange.error?.error).toMatchObject({ code: "parameter_out_of_range", param: "limit" });
  });

  test("getDelivery: 200, delivered once the worker has sent it; the receiver verifies it with verifyWebhook", async ({
    api,
    receiver,
  }) => {
    const delivered = await waitFor(
      async () => {
        const { data } = await client(api).GET("/v1/deliveries/{delivery_id}", {
          params: { path: { delivery_id: delivery.id } },
        });
        return data?.status === "delivered" ? data : undefined;
      },
      { what: "the delivery to be delivered" },
    );
    expect(delivered).toMatchObject({ id: delivery.id, attempts: 1, response_code: 200, next_retry_at: null });

    const [webhook] = receiver.received;
    expect(webhook).toBeDefined();
    const payload = verifyWebhook(subscription.secret, webhook!.headers, webhook!.body);
    expect(payload).toEqual({
      type: "invoice.paid",
      timestamp: event.created_at,
      data: { invoice: "in_42", amount_due: 4200 },
    });
    expect(() => verifyWebhook(subscription.secret, webhook!.headers, webhook!.body.replace("4200", "4201"))).toThrow(
      WebhookVerificationError,
    );
    const otherSecret = (
      await client(api).POST("/v1/subscriptions", { body: { url: "https://example.com/hooks", events: ["a"] } })
    ).data!.secret!;
    expect(() => verifyWebhook(otherSecret, webhook!.headers, webhook!.body)).toThrow(WebhookVerificationError);
  });

  test("listDeliveryAttempts: 200, the attempt with its response; 404 for an unknown delivery", async ({
    api,
    receiver,
  }) => {
    const { data, response } = await client(api).GET("/v1/deliveries/{delivery_id}/attempts", {
      params: { path: { delivery_id: delivery.id } },
    });
    expect(response.status).toBe(200);
    expect(data).toMatchObject({ object: "list", url: `/v1/deliveries/${delivery.id}/attempts`, has_more: false });
    expect(data!.data).toEqual([
      expect.objectContaining({
        object: "delivery_attempt",
        delivery_id: delivery.id,
        number: 1,
        url: subscription.url,
        response_code: 200,
        error: null,
      }),
    ]);
    const missing = await client(api).GET("/v1/deliveries/{delivery_id}/attempts", {
      params: { path: { delivery_id: "dlv_01JD5V6Y7Z8X9W0V1U2T3S4R5Q" } },
    });
    expect(missing.response.status).toBe(404);
  });

  test("retryDelivery: 202 queued, and the receiver gets it again", async ({ api, receiver }) => {
    const { data, response } = await client(api).POST("/v1/deliveries/{delivery_id}/retry", {
      params: { path: { delivery_id: delivery.id } },
    });
    expect(response.status).toBe(202);
    expect(data).toMatchObject({ id: delivery.id, status: "queued" });
    await waitFor(() => receiver.received.length >= 2 || undefined, { what: "the resend" });
    expect(verifyWebhook(subscription.secret, receiver.received[1]!.headers, receiver.received[1]!.body).type).toBe(
      "invoice.paid",
    );
  });

  /** The webhooks the receiver got for an event, once it has `count` of them. */
  const webhooksOf = (receiver: TestReceiver, eventId: string, count = 1) =>
    waitFor(
      () => {
        const received = receiver.received.filter((webhook) => webhook.headers["webhook-id"] === eventId);
        return received.length >= count ? received : undefined;
      },
      { what: `${count} webhook(s) of ${eventId}` },
    );

  const deliveryOf = (api: TestApi, deliveryId: string, done: (delivery: Delivery) => boolean) =>
    waitFor(
      async () => {
        const { data } = await client(api).GET("/v1/deliveries/{delivery_id}", {
          params: { path: { delivery_id: deliveryId } },
        });
        return data && done(data) ? data : undefined;
      },
      { what: `delivery ${deliveryId}` },
    );

  test("sendTestEvent: 202 with a queued delivery of webhook.test to this subscription alone; 404 for an unknown one", async ({
    api,
    receiver,
  }) => {
    const { data, response } = await client(api).POST("/v1/subscriptions/{subscription_id}/test", {
      params: { path: { subscription_id: subscription.id } },
    });
    expect(response.status).toBe(202);
    expect(data).toMatchObject({
      object: "delivery",
      subscription_id: subscription.id,
      event: "webhook.test",
      status: "queued",
      attempts: 0,
    });
    const [webhook] = await webhooksOf(receiver, data!.event_id);
    expect(verifyWebhook(subscription.secret, webhook!.headers, webhook!.body)).toMatchObject({
      type: "webhook.test",
      data: expect.any(Object),
    });

    const missing = await client(api).POST("/v1/subscriptions/{subscription_id}/test", {
      params: { path: { subscription_id: "sub_01JD5V6Y7Z8X9W0V1U2T3S4R5Q" } },
    });
    expect(missing.response.status).toBe(404);
  });

  test("recoverSubscription: 202 with the count of failed deliveries queued again, which then succeed; listDeliveries filters by response_code", async ({
    api,
    receiver,
  }) => {
    receiverAnswers.status = 500;
    const sent = await client(api).POST("/v1/subscriptions/{subscription_id}/test", {
      params: { path: { subscription_id: subscription.id } },
      body: { type: "invoice.voided", data: { invoice: "in_43" } },
    });
    expect(sent.response.status).toBe(202);
    // Every attempt of the (shortened) retry schedule fails, and none is left.
    const failed = await deliveryOf(api, sent.data!.id, (d) => d.status === "failed" && d.next_retry_at === null);
    expect(failed).toMatchObject({ response_code: 500 });
    const byCode = await client(api).GET("/v1/deliveries", {
      params: { query: { subscription_id: subscription.id, response_code: "5xx" } },
    });
    expect(byCode.response.status).toBe(200);
    expect(byCode.data!.data.map((d) => d.id)).toEqual([sent.data!.id]);

    receiverAnswers.status = 200;
    const { data, response } = await client(api).POST("/v1/subscriptions/{subscription_id}/recover", {
      params: { path: { subscription_id: subscription.id } },
      body: { since: subscription.created_at },
    });
    expect(response.status).toBe(202);
    expect(data).toMatchObject({
      object: "recovery",
      subscription_id: subscription.id,
      since: subscription.created_at,
      deliveries: 1,
    });
    expect(await deliveryOf(api, sent.data!.id, (d) => d.status === "delivered")).toMatchObject({ response_code: 200 });

    const backwards = await client(api).POST("/v1/subscriptions/{subscription_id}/recover", {
      params: { path: { subscription_id: subscription.id } },
      body: { since: "2026-11-02T00:00:00Z", until: "2026-11-01T00:00:00Z" },
    });
    expect(backwards.response.status).toBe(400);
    expect(backwards.error?.error.param).toBe("until");
  });

  test("getSubscriptionStats: 200 with the attempts of the recover above by class, hourly; 400 for a window over 31 days", async ({
    api,
  }) => {
    const { data, response } = await client(api).GET("/v1/subscriptions/{subscription_id}/stats", {
      params: { path: { subscription_id: subscription.id }, query: { since: subscription.created_at } },
    });
    expect(response.status).toBe(200);
    expect(data).toMatchObject({ object: "subscription_stats", subscription_id: subscription.id });
    expect(data!.deliveries.failed).toBe(0);
    expect(data!.attempts["5xx"]).toBeGreaterThan(0);
    // A resend above made a second successful attempt of one delivery.
    expect(data!.attempts["2xx"]).toBeGreaterThan(data!.deliveries.delivered);
    expect(data!.attempts.total).toBe(data!.attempts["2xx"] + data!.attempts["5xx"]);
    expect(data!.latency_ms.p50).not.toBeNull();
    expect(data!.series.reduce((sum, point) => sum + point.delivered, 0)).toBe(data!.deliveries.delivered);

    const tooLong = await client(api).GET("/v1/subscriptions/{subscription_id}/stats", {
      params: {
        path: { subscription_id: subscription.id },
        query: { since: "2026-01-01T00:00:00Z", until: "2026-03-01T00:00:00Z" },
      },
    });
    expect(tooLong.response.status).toBe(400);
    expect(tooLong.error?.error).toMatchObject({ code: "parameter_out_of_range", param: "since" });
  });

  test("rotateSubscriptionSecret: 200 with a new secret; after a 0s overlap webhooks verify with it, not the old one", async ({
    api,
    receiver,
  }) => {
    const { data, response } = await client(api).POST("/v1/subscriptions/{subscription_id}/rotate_secret", {
      params: { path: { subscription_id: subscription.id } },
      body: { overlap: "0s" },
    });
    expect(response.status).toBe(200);
    expect(data).toMatchObject({ id: subscription.id, object: "subscription" });
    expect(data!.secret).toMatch(/^whsec_/);
    expect(data!.secret).not.toBe(subscription.secret);

    const sent = await client(api).POST("/v1/subscriptions/{subscription_id}/test", {
      params: { path: { subscription_id: subscription.id } },
    });
    const [webhook] = await webhooksOf(receiver, sent.data!.event_id);
    expect(verifyWebhook(data!.secret!, webhook!.headers, webhook!.body).type).toBe("webhook.test");
    expect(() => verifyWebhook(subscription.secret, webhook!.headers, webhook!.body)).toThrow(WebhookVerificationError);
  });

  test("deleteSubscription: 200, then the subscription is a 404", async ({ api, receiver }) => {
    const { data, response } = await client(api).DELETE("/v1/subscriptions/{subscription_id}", {
      params: { path: { subscription_id: subscription.id } },
    });
    expect(response.status).toBe(200);
    expect(data).toEqual({ id: subscription.id, object: "subscription", deleted: true });
    const gone = await client(api).GET("/v1/subscriptions/{subscription_id}", {
      params: { path: { subscription_id: subscription.id } },
    });
    expect(gone.response.status).toBe(404);
  });

  test("createPortalSession: 201 with a token scoped to the tenant, which the client then uses; a scoped credential gets 403", async ({
    api,
    receiver,
  }) => {
    const { data, error, response } = await client(api).POST("/v1/portal_sessions", {
      body: { tenant_id: "acme", expires_in: "15m" },
    });
    expect(error).toBeUndefined();
    expect(response.status).toBe(201);
    expect(data).toMatchObject({ object: "portal_session", tenant_id: "acme" });
    expect(data!.url.endsWith(`/portal#token=${data!.token}`)).toBe(true);
    const asTenant = client(api, data!.token);
    const listed = await asTenant.GET("/v1/subscriptions");
    expect(listed.data?.data).toEqual([]);
    const refused = await asTenant.POST("/v1/portal_sessions", { body: { tenant_id: "acme" } });
    expect(refused.response.status).toBe(403);
    expect(refused.error?.error).toMatchObject({ type: "permission_error", code: "permission_denied" });
  });

  test("the event-type catalog: create (409 again), list, get, update, archive; publishEvent answers 422 for data its schema refuses", async ({
    api,
    receiver,
  }) => {
    const schema = { type: "object", properties: { amount: { type: "integer" } }, required: ["amount"] };
    const created = await client(api).POST("/v1/event-types", {
      body: { name: "client.charge", description: "A charge.", schema, examples: [{ amount: 1 }] },
    });
    expect(created.response.status).toBe(201);
    expect(created.data).toMatchObject({ object: "event_type", name: "client.charge", schema, deprecated: false });
    const again = await client(api).POST("/v1/event-types", { body: { name: "client.charge" } });
    expect(again.response.status).toBe(409);
    expect(again.error?.error.code).toBe("resource_already_exists");

    const list = await client(api).GET("/v1/event-types", { params: { query: { limit: 10 } } });
    expect(list.response.status).toBe(200);
    expect(list.data!.data.map((type) => type.name)).toContain("client.charge");
    const got = await client(api).GET("/v1/event-types/{name}", { params: { path: { name: "client.charge" } } });
    expect(got.data).toEqual(created.data);

    const refused = await client(api).POST("/v1/events", { body: { type: "client.charge", data: { amount: "1" } } });
    expect(refused.response.status).toBe(422);
    expect(refused.error?.error).toMatchObject({ code: "payload_invalid", param: "data" });
    expect(refused.error?.error.message).toContain("/amount: must be integer");

    const updated = await client(api).PUT("/v1/event-types/{name}", {
      params: { path: { name: "client.charge" } },
      body: { deprecated: true },
    });
    expect(updated.data).toMatchObject({ deprecated: true, schema });
    const archived = await client(api).DELETE("/v1/event-types/{name}", {
      params: { path: { name: "client.charge" } },
    });
    expect(archived.response.status).toBe(200);
    expect(archived.data).toMatchObject({ archived: true });
  });

  test("a subscription's filter: set on create, returned, and only matching events are delivered", async ({
    api,
    receiver,
  }) => {
    const { data } = await client(api).POST("/v1/subscriptions", {
      body: { url: `${receiver.url}/filtered`, events: ["client.filtered"], filter: { data: { keep: true } } },
    });
    expect(data!.filter).toEqual({ data: { keep: true } });
    for (const keep of [false, true]) {
      const published = await client(api).POST("/v1/events", { body: { type: "client.filtered", data: { keep } } });
      expect(published.response.status).toBe(202);
    }
    await waitFor(() => receiver.received.some((webhook) => webhook.path === "/filtered"), { what: "the match" });
    const deliveries = await client(api).GET("/v1/deliveries", { params: { query: { subscription_id: data!.id } } });
    expect(deliveries.data!.data).toHaveLength(1);
  });

  test("exercises every operation of the OpenAPI document, each answered with a success status, each with a request-id", async ({
    api,
    receiver,
  }) => {
    const document = await openApiDocument(api);
    const notExercised: string[] = [];
    for (const [path, operations] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        const statuses = answered.get(`${method.toUpperCase()} ${path}`) ?? [];
        if (!statuses.some((status) => status >= 200 && status < 300))
          notExercised.push(`${operation.operationId} (${method.toUpperCase()} ${path})`);
      }
    }
    expect(notExercised, "operations of the document this file does not call successfully through the client").toEqual(
      [],
    );
    expect(requestIds.length).toBeGreaterThan(0);
    for (const id of requestIds) expect(id).toMatch(/^req_[0-9A-Z]{26}$/);
  });
});
