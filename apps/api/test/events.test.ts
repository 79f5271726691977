import { startTestApi, subscribe, type TestApi } from "@webhooks/api/testing";
import { dispatchJobId } from "@webhooks/queue";
import { testConfig } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { deliveryListSchema } from "../src/deliveries/schemas.ts";
import { eventSchema } from "../src/events/schemas.ts";
import { subscriptionSchema } from "../src/subscriptions/schemas.ts";
import { apiTest } from "./fixtures.ts";

const test = apiTest();

async function subscribeTo(api: TestApi, events: string[], extra: Record<string, unknown> = {}): Promise<string> {
  return (await subscribe(api, { url: "https://example.com/in", events, ...extra })).id;
}

/** A publish whose answer the test checks itself (some expect a 400 or a 409). */
async function send(
  api: TestApi,
  type: string,
  data: Record<string, unknown> = { n: 1 },
  headers: Record<string, string> = {},
) {
  return api.call("POST", "/v1/events", { json: { type, data }, headers });
}

/** Subscription ids that got a delivery for the event. */
async function deliveredTo(api: TestApi, eventId: string): Promise<string[]> {
  const response = await api.get("/v1/deliveries?limit=100", 200, { schema: deliveryListSchema });
  return response.body.data
    .filter((d) => d.event_id === eventId)
    .map((d) => d.subscription_id)
    .sort();
}

describe("POST /v1/events", () => {
  test("stores the event and queues one delivery per matching active subscription", async ({ api }) => {
    const type = "fanout.created";
    const exact = await subscribeTo(api, [type, "other.thing"]);
    const wildcard = await subscribeTo(api, ["*"]);
    const otherType = await subscribeTo(api, ["fanout.deleted"]);
    const prefixOnly = await subscribeTo(api, ["fanout"]);
    const paused = await subscribeTo(api, [type], { active: false });
    const deleted = await subscribeTo(api, [type]);
    expect((await api.call("DELETE", `/v1/subscriptions/${deleted}`)).status).toBe(200);

    const response = await send(api, type, { invoice: "in_1", amount: 4200, nested: { ok: true, list: [1, "two"] } });
    expect(response.status).toBe(202);
    expect(response.body).toMatchObject({
      object: "event",
      type,
      data: { invoice: "in_1", amount: 4200, nested: { ok: true, list: [1, "two"] } },
    });
    expect(response.body.id).toMatch(/^evt_[0-9A-HJKMNP-TV-Z]{26}$/);

    const targets = await deliveredTo(api, response.body.id);
    expect(targets).toEqual([exact, wildcard].sort());
    for (const id of [otherType, prefixOnly, paused, deleted]) expect(targets).not.toContain(id);

    // Each delivery starts queued, with nothing attempted, and is in the queue: the event's
    // deliveries go as one dispatch job, which the queue's index of dispatches knows them by.
    const deliveries = (await api.call("GET", `/v1/deliveries?limit=100`)).body.data.filter(
      (d: { event_id: string }) => d.event_id === response.body.id,
    );
    for (const delivery of deliveries) {
      expect(delivery).toMatchObject({
        object: "delivery",
        event: type,
        status: "queued",
        attempts: 0,
        response_code: null,
        next_retry_at: null,
      });
    }
    const ids = deliveries.map((d: { id: string }) => d.id).sort();
    const dispatch = await api.queue.queue.getJob(dispatchJobId(ids[0]));
    // Each names the subscription too, so a worker can check its line before any claim.
    expect(dispatch?.name).toBe("dispatch");
    expect(dispatch?.data).toEqual({
      deliveries: deliveries
        .map((d: { id: string; subscription_id: string }) => ({ deliveryId: d.id, subscriptionId: d.subscription_id }))
        .sort((a: { deliveryId: string }, b: { deliveryId: string }) => a.deliveryId.localeCompare(b.deliveryId)),
    });
    // No job of their own, and yet not missing to the reconciler.
    for (const id of ids) expect(await api.queue.queue.getJob(id)).toBeUndefined();
    expect(await api.queue.withoutJob(ids)).toEqual([]);

    const fetched = await api.get(`/v1/events/${response.body.id}`, 200, { schema: eventSchema });
    expect(fetched.body).toEqual(response.body);
    // The other tests count deliveries; the wildcard subscription would get them all.
    await api.call("DELETE", `/v1/subscriptions/${wildcard}`);
  });

  test("gives each of many concurrent publishes its own event and deliveries", async ({ api }) => {
    // Publishes arriving together are written as one batch; none may see another's targets.
    const paid = await subscribeTo(api, ["batch.paid"]);
    const refunded = await subscribeTo(api, ["batch.refunded"]);
    const both = await subscribeTo(api, ["batch.paid", "batch.refunded"]);
    const requests = Array.from({ length: 40 }, (_, i) => ({
      type: i % 3 === 0 ? "batch.refunded" : i % 3 === 1 ? "batch.paid" : "batch.nobody",
      data: { i },
      key: i % 5 === 0 ? `batch-key-${i}` : undefined,
    }));
    // Each keyed request is also sent a second time, in the same burst.
    const burst = [...requests, ...requests.filter((r) => r.key !== undefined)];
    const responses = await Promise.all(
      burst.map((r) => send(api, r.type, r.data, r.key === undefined ? {} : { "Idempotency-Key": r.key })),
    );
    expect(responses.every((r) => r.status === 202)).toBe(true);
    const firsts = responses.slice(0, requests.length);
    expect(new Set(firsts.map((r) => r.body.id)).size).toBe(requests.length);
    for (const [index, replay] of responses.slice(requests.length).entries()) {
      const original = firsts[requests.findIndex((r) => r.key === burst[requests.length + index]!.key)]!;
      expect(replay.body).toEqual(original.body);
    }
    const log = (await api.call("GET", "/v1/deliveries?limit=100")).body.data as {
      event_id: string;
      subscription_id: string;
      event: string;
    }[];
    for (const [index, request] of requests.entries()) {
      const event = firsts[index]!.body;
      expect(event).toMatchObject({ type: request.type, data: request.data });
      const expected =
        request.type === "batch.paid" ? [paid, both] : request.type === "batch.refunded" ? [refunded, both] : [];
      const got = log.filter((d) => d.event_id === event.id);
      expect(got.map((d) => d.subscription_id).sort()).toEqual(expected.sort());
      expect(got.every((d) => d.event === request.type)).toBe(true);
    }
  });

  test("accepts an event nobody listens to", async ({ api }) => {
    const response = await send(api, "nobody.listens");
    expect(response.status).toBe(202);
    expect(await deliveredTo(api, response.body.id)).toEqual([]);
  });

  test("pause -> publish -> no delivery; resume -> publish -> delivery", async ({ api }) => {
    const type = "pause.check";
    const id = await subscribeTo(api, [type]);
    await api.put(`/v1/subscriptions/${id}`, { active: false }, 200, { schema: subscriptionSchema });
    const whilePaused = await send(api, type);
    expect(await deliveredTo(api, whilePaused.body.id)).toEqual([]);

    await api.put(`/v1/subscriptions/${id}`, { active: true }, 200, { schema: subscriptionSchema });
    const afterResume = await send(api, type);
    expect(await deliveredTo(api, afterResume.body.id)).toEqual([id]);
    // Resuming does not deliver what was published while paused.
    expect(await deliveredTo(api, whilePaused.body.id)).toEqual([]);
  });

  test("follows an events update for the next event", async ({ api }) => {
    const id = await subscribeTo(api, ["before.update"]);
    await api.put(`/v1/subscriptions/${id}`, { events: ["after.update"] }, 200, { schema: subscriptionSchema });
    expect(await deliveredTo(api, (await send(api, "before.update")).body.id)).toEqual([]);
    expect(await deliveredTo(api, (await send(api, "after.update")).body.id)).toEqual([id]);
  });

  describe("Idempotency-Key", () => {
    test("returns the same event for the same key and body, without new deliveries", async ({ api }) => {
      await subscribeTo(api, ["idem.same"]);
      const first = await send(api, "idem.same", { a: 1, b: [1, 2] }, { "Idempotency-Key": "key-same" });
      // Same content, keys in another order: still the same request.
      const again = await api.call("POST", "/v1/events", {
        body: '{"data":{"b":[1,2],"a":1},"type":"idem.same"}',
        headers: { "content-type": "application/json", "Idempotency-Key": "key-same" },
      });
      expect(first.status).toBe(202);
      expect(again.status).toBe(202);
      expect(again.body).toEqual(first.body);
      expect(again.headers["idempotent-replayed"]).toBe("true");
      expect(first.headers["idempotent-replayed"]).toBeUndefined();
      expect((await deliveredTo(api, first.body.id)).length).toBe(1);
    });

    test("answers 409 when the key is reused with another body", async ({ api }) => {
      const first = await send(api, "idem.diff", { a: 1 }, { "Idempotency-Key": "key-diff" });
      expect(first.status).toBe(202);
      for (const [type, data] of [
        ["idem.diff", { a: 2 }],
        ["idem.other", { a: 1 }],
      ] as const) {
        const conflict = await send(api, type, data, { "Idempotency-Key": "key-diff" });
        expect(conflict.status).toBe(409);
        expect(conflict.body.error).toMatchObject({ type: "idempotency_error", code: "idempotency_key_reused" });
      }
    });

    test("creates exactly one event when the same request races", async ({ api }) => {
      await subscribeTo(api, ["idem.race"]);
      const responses = await Promise.all(
        Array.from({ length: 8 }, () => send(api, "idem.race", { same: true }, { "Idempotency-Key": "key-race" })),
      );
      expect(responses.map((r) => r.status)).toEqual(Array(8).fill(202));
      expect(new Set(responses.map((r) => r.body.id)).size).toBe(1);
      expect((await deliveredTo(api, responses[0]!.body.id)).length).toBe(1);
    });

    test("rejects an over-long key", async ({ api }) => {
      const response = await send(api, "idem.long", {}, { "Idempotency-Key": "k".repeat(256) });
      expect(response.status).toBe(400);
      expect(response.body.error.param).toBe("Idempotency-Key");
    });

    test("rejects a key with characters outside printable ASCII, instead of storing it garbled", async ({ api }) => {
      // The header's bytes: "é" in UTF-8, "é" in latin1, a tab.
      for (const key of [Buffer.from("clé", "utf8"), Buffer.from("cl\u00e9", "latin1"), Buffer.from("a\tb")]) {
        const response = await send(api, "idem.ascii", {}, { "Idempotency-Key": key.toString("latin1") });
        expect(response.status, key.toString("hex")).toBe(400);
        expect(response.body.error).toMatchObject({
          code: "parameter_invalid",
          param: "Idempotency-Key",
          message: "Idempotency-Key must be 1 to 255 printable ASCII characters",
        });
      }
      expect(await api.db.event.count({ where: { type: "idem.ascii" } })).toBe(0);
      // Spaces and every other printable ASCII character are fine.
      expect((await send(api, "idem.ascii", {}, { "Idempotency-Key": "order 42 ~!@#$%^&*()_+{}|:<>?" })).status).toBe(
        202,
      );
    });
  });

  test.for([
    [{ data: {} }, "parameter_missing", "type"],
    [{ type: "a.b" }, "parameter_missing", "data"],
    [{ type: "a.b", data: [] }, "parameter_invalid", "data"],
    [{ type: "a.b", data: "text" }, "parameter_invalid", "data"],
    [{ type: "a.b", data: null }, "parameter_invalid", "data"],
    [{ type: "", data: {} }, "parameter_invalid", "type"],
    [{ type: "bad type", data: {} }, "parameter_invalid", "type"],
    [{ type: "a.b", data: { text: "nul\u0000inside" } }, "parameter_invalid", "data"],
    [{ type: "a.b", data: { "k\u0000": 1 } }, "parameter_invalid", "data"],
    [{ type: "a.b", data: { text: "lone \ud800 surrogate" } }, "parameter_invalid", "data"],
    [{ type: "a.b", data: { "\udc00": 1 } }, "parameter_invalid", "data"],
    [{ type: "a.b", data: {}, extra: true }, "parameter_unknown", "extra"],
  ] as const)("rejects %j with a 400", async ([body, code, param], { api }) => {
    const response = await api.post("/v1/events", body, 400);
    expect(response.body.error).toMatchObject({ type: "invalid_request_error", code, param });
  });

  test("refuses operational event types, which only the service publishes", async ({ api }) => {
    // A subscription may name them: that is how it receives them.
    const listener = await subscribeTo(api, ["operational.subscription.disabled"]);
    for (const type of ["operational.subscription.disabled", "operational.anything"]) {
      const response = await send(api, type, { subscription_id: listener });
      expect(response.status).toBe(400);
      expect(response.body.error).toMatchObject({
        type: "invalid_request_error",
        code: "parameter_invalid",
        param: "type",
      });
      expect(response.body.error.message).toContain('must not start with "operational."');
    }
    const deliveries = await api.call("GET", `/v1/deliveries?subscription_id=${listener}`);
    expect(deliveries.body.data).toEqual([]);
    // Only the prefix is reserved.
    expect((await send(api, "billing.operational.review")).status).toBe(202);
  });

  test("keeps every key of data, __proto__ included, and paired surrogates", async ({ api }) => {
    const response = await api.call("POST", "/v1/events", {
      body: '{"type":"keys.kept","data":{"__proto__":{"x":1},"emoji":"\\ud83d\\ude00","constructor":2}}',
      headers: { "content-type": "application/json" },
    });
    expect(response.status).toBe(202);
    const fetched = await api.call("GET", `/v1/events/${response.body.id}`);
    expect(JSON.stringify(fetched.body.data)).toBe('{"emoji":"😀","__proto__":{"x":1},"constructor":2}');
  });

  test("rejects data nested deeper than PostgreSQL should store", async ({ api }) => {
    let data: Record<string, unknown> = { leaf: 1 };
    for (let i = 0; i < 40; i++) data = { d: data };
    const response = await send(api, "deep.data", data);
    expect(response.status).toBe(400);
    expect(response.body.error.param).toBe("data");
  });
});

describe("GET /v1/events/{id}", () => {
  test("404s for unknown and malformed ids", async ({ api }) => {
    for (const id of ["evt_01JD5V6Y7Z8X9W0V1U2T3S4R5Q", "xyz"]) {
      const response = await api.get(`/v1/events/${id}`, 404);
      expect(response.body.error.code).toBe("resource_missing");
    }
  });
});

describe("with Redis unreachable", () => {
  test("still accepts the event and commits its deliveries for the reconciler", async ({ database }) => {
    const down = await startTestApi(testConfig(database.url, { REDIS_URL: "redis://127.0.0.1:1" }));
    try {
      const sub = await down.call("POST", "/v1/subscriptions", {
        json: { url: "https://example.com/x", events: ["redis.down"] },
      });
      const started = Date.now();
      const response = await down.call("POST", "/v1/events", { json: { type: "redis.down", data: {} } });
      expect(response.status).toBe(202);
      expect(Date.now() - started).toBeLessThan(5_000);
      const deliveries = await down.call("GET", `/v1/deliveries?subscription_id=${sub.body.id}`);
      expect(deliveries.body.data).toHaveLength(1);
      expect(deliveries.body.data[0]).toMatchObject({ status: "queued", event_id: response.body.id });
      const ready = await down.call("GET", "/readyz", { key: null });
      expect(ready.status).toBe(503);
      expect(ready.body.checks).toMatchObject({ postgres: { ok: true }, redis: { ok: false } });
    } finally {
      await down.close();
    }
  });
});
