import { createTestDatabase, testConfig, type TestDatabase } from "@webhooks/testing";
import { startTestApi, type TestApi } from "@webhooks/api/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

let database: TestDatabase;
let api: TestApi;

beforeAll(async () => {
  database = await createTestDatabase();
  api = await startTestApi(testConfig(database.url));
});
afterAll(async () => {
  await api.close();
  await database.drop();
});

async function subscribe(events: string[], extra: Record<string, unknown> = {}): Promise<string> {
  const response = await api.call("POST", "/v1/subscriptions", { json: { url: "https://example.com/in", events, ...extra } });
  expect(response.status).toBe(201);
  return response.body.id;
}

async function publish(type: string, data: Record<string, unknown> = { n: 1 }, headers: Record<string, string> = {}) {
  return api.call("POST", "/v1/events", { json: { type, data }, headers });
}

/** Subscription ids that got a delivery for the event. */
async function deliveredTo(eventId: string): Promise<string[]> {
  const response = await api.call("GET", "/v1/deliveries?limit=100");
  return response.body.data
    .filter((d: { event_id: string }) => d.event_id === eventId)
    .map((d: { subscription_id: string }) => d.subscription_id)
    .sort();
}

describe("POST /v1/events", () => {
  it("stores the event and queues one delivery per matching active subscription", async () => {
    const type = "fanout.created";
    const exact = await subscribe([type, "other.thing"]);
    const wildcard = await subscribe(["*"]);
    const otherType = await subscribe(["fanout.deleted"]);
    const prefixOnly = await subscribe(["fanout"]);
    const paused = await subscribe([type], { active: false });
    const deleted = await subscribe([type]);
    expect((await api.call("DELETE", `/v1/subscriptions/${deleted}`)).status).toBe(200);

    const response = await publish(type, { invoice: "in_1", amount: 4200, nested: { ok: true, list: [1, "two"] } });
    expect(response.status).toBe(202);
    expect(response.body).toMatchObject({ object: "event", type, data: { invoice: "in_1", amount: 4200, nested: { ok: true, list: [1, "two"] } } });
    expect(response.body.id).toMatch(/^evt_[0-9A-HJKMNP-TV-Z]{26}$/);

    const targets = await deliveredTo(response.body.id);
    expect(targets).toEqual([exact, wildcard].sort());
    for (const id of [otherType, prefixOnly, paused, deleted]) expect(targets).not.toContain(id);

    // Each delivery starts queued, with nothing attempted, and has its job in the queue.
    const deliveries = (await api.call("GET", `/v1/deliveries?limit=100`)).body.data.filter(
      (d: { event_id: string }) => d.event_id === response.body.id,
    );
    for (const delivery of deliveries) {
      expect(delivery).toMatchObject({ object: "delivery", event: type, status: "queued", attempts: 0, response_code: null, next_retry_at: null });
      const job = await api.queue.queue.getJob(delivery.id);
      // The job names the subscription too, so a worker can check its line before any claim.
      expect(job?.data).toEqual({ deliveryId: delivery.id, subscriptionId: delivery.subscription_id });
    }

    const fetched = await api.call("GET", `/v1/events/${response.body.id}`);
    expect(fetched.status).toBe(200);
    expect(fetched.body).toEqual(response.body);
    // The other tests count deliveries; the wildcard subscription would get them all.
    await api.call("DELETE", `/v1/subscriptions/${wildcard}`);
  });

  it("gives each of many concurrent publishes its own event and deliveries", async () => {
    // Publishes arriving together are written as one batch; none may see another's targets.
    const paid = await subscribe(["batch.paid"]);
    const refunded = await subscribe(["batch.refunded"]);
    const both = await subscribe(["batch.paid", "batch.refunded"]);
    const requests = Array.from({ length: 40 }, (_, i) => ({
      type: i % 3 === 0 ? "batch.refunded" : i % 3 === 1 ? "batch.paid" : "batch.nobody",
      data: { i },
      key: i % 5 === 0 ? `batch-key-${i}` : undefined,
    }));
    // Each keyed request is also sent a second time, in the same burst.
    const burst = [...requests, ...requests.filter((r) => r.key !== undefined)];
    const responses = await Promise.all(
      burst.map((r) => publish(r.type, r.data, r.key === undefined ? {} : { "Idempotency-Key": r.key })),
    );
    expect(responses.every((r) => r.status === 202)).toBe(true);
    const firsts = responses.slice(0, requests.length);
    expect(new Set(firsts.map((r) => r.body.id)).size).toBe(requests.length);
    for (const [index, replay] of responses.slice(requests.length).entries()) {
      const original = firsts[requests.findIndex((r) => r.key === burst[requests.length + index]!.key)]!;
      expect(replay.body).toEqual(original.body);
    }
    const log = (await api.call("GET", "/v1/deliveries?limit=100")).body.data as { event_id: string; subscription_id: string; event: string }[];
    for (const [index, request] of requests.entries()) {
      const event = firsts[index]!.body;
      expect(event).toMatchObject({ type: request.type, data: request.data });
      const expected = request.type === "batch.paid" ? [paid, both] : request.type === "batch.refunded" ? [refunded, both] : [];
      const got = log.filter((d) => d.event_id === event.id);
      expect(got.map((d) => d.subscription_id).sort()).toEqual(expected.sort());
      expect(got.every((d) => d.event === request.type)).toBe(true);
    }
  });

  it("accepts an event nobody listens to", async () => {
    const response = await publish("nobody.listens");
    expect(response.status).toBe(202);
    expect(await deliveredTo(response.body.id)).toEqual([]);
  });

  it("pause -> publish -> no delivery; resume -> publish -> delivery", async () => {
    const type = "pause.check";
    const id = await subscribe([type]);
    await api.call("PUT", `/v1/subscriptions/${id}`, { json: { active: false } });
    const whilePaused = await publish(type);
    expect(await deliveredTo(whilePaused.body.id)).toEqual([]);

    await api.call("PUT", `/v1/subscriptions/${id}`, { json: { active: true } });
    const afterResume = await publish(type);
    expect(await deliveredTo(afterResume.body.id)).toEqual([id]);
    // Resuming does not deliver what was published while paused.
    expect(await deliveredTo(whilePaused.body.id)).toEqual([]);
  });

  it("follows an events update for the next event", async () => {
    const id = await subscribe(["before.update"]);
    await api.call("PUT", `/v1/subscriptions/${id}`, { json: { events: ["after.update"] } });
    expect(await deliveredTo((await publish("before.update")).body.id)).toEqual([]);
    expect(await deliveredTo((await publish("after.update")).body.id)).toEqual([id]);
  });

  describe("Idempotency-Key", () => {
    it("returns the same event for the same key and body, without new deliveries", async () => {
      await subscribe(["idem.same"]);
      const first = await publish("idem.same", { a: 1, b: [1, 2] }, { "Idempotency-Key": "key-same" });
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
      expect((await deliveredTo(first.body.id)).length).toBe(1);
    });

    it("answers 409 when the key is reused with another body", async () => {
      const first = await publish("idem.diff", { a: 1 }, { "Idempotency-Key": "key-diff" });
      expect(first.status).toBe(202);
      for (const [type, data] of [["idem.diff", { a: 2 }], ["idem.other", { a: 1 }]] as const) {
        const conflict = await publish(type, data, { "Idempotency-Key": "key-diff" });
        expect(conflict.status).toBe(409);
        expect(conflict.body.error).toMatchObject({ type: "idempotency_error", code: "idempotency_key_reused" });
      }
    });

    it("creates exactly one event when the same request races", async () => {
      await subscribe(["idem.race"]);
      const responses = await Promise.all(
        Array.from({ length: 8 }, () => publish("idem.race", { same: true }, { "Idempotency-Key": "key-race" })),
      );
      expect(responses.map((r) => r.status)).toEqual(Array(8).fill(202));
      expect(new Set(responses.map((r) => r.body.id)).size).toBe(1);
      expect((await deliveredTo(responses[0]!.body.id)).length).toBe(1);
    });

    it("rejects an over-long key", async () => {
      const response = await publish("idem.long", {}, { "Idempotency-Key": "k".repeat(256) });
      expect(response.status).toBe(400);
      expect(response.body.error.param).toBe("Idempotency-Key");
    });
  });

  it.each([
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
  ])("rejects %j with a 400", async (body, code, param) => {
    const response = await api.call("POST", "/v1/events", { json: body });
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({ type: "invalid_request_error", code, param });
  });

  it("refuses operational event types, which only the service publishes (contract §11)", async () => {
    // A subscription may name them: that is how it receives them.
    const listener = await subscribe(["operational.subscription.disabled"]);
    for (const type of ["operational.subscription.disabled", "operational.anything"]) {
      const response = await publish(type, { subscription_id: listener });
      expect(response.status).toBe(400);
      expect(response.body.error).toMatchObject({ type: "invalid_request_error", code: "parameter_invalid", param: "type" });
      expect(response.body.error.message).toContain('must not start with "operational."');
    }
    const deliveries = await api.call("GET", `/v1/deliveries?subscription_id=${listener}`);
    expect(deliveries.body.data).toEqual([]);
    // Only the prefix is reserved.
    expect((await publish("billing.operational.review")).status).toBe(202);
  });

  it("keeps every key of data, __proto__ included, and paired surrogates", async () => {
    const response = await api.call("POST", "/v1/events", {
      body: '{"type":"keys.kept","data":{"__proto__":{"x":1},"emoji":"\\ud83d\\ude00","constructor":2}}',
      headers: { "content-type": "application/json" },
    });
    expect(response.status).toBe(202);
    const fetched = await api.call("GET", `/v1/events/${response.body.id}`);
    expect(JSON.stringify(fetched.body.data)).toBe('{"emoji":"😀","__proto__":{"x":1},"constructor":2}');
  });

  it("rejects data nested deeper than PostgreSQL should store", async () => {
    let data: Record<string, unknown> = { leaf: 1 };
    for (let i = 0; i < 40; i++) data = { d: data };
    const response = await publish("deep.data", data);
    expect(response.status).toBe(400);
    expect(response.body.error.param).toBe("data");
  });
});

describe("GET /v1/events/{id}", () => {
  it("404s for unknown and malformed ids", async () => {
    for (const id of ["evt_01JD5V6Y7Z8X9W0V1U2T3S4R5Q", "xyz"]) {
      const response = await api.call("GET", `/v1/events/${id}`);
      expect(response.status).toBe(404);
      expect(response.body.error.code).toBe("resource_missing");
    }
  });
});

describe("with Redis unreachable", () => {
  it("still accepts the event and commits its deliveries for the reconciler", async () => {
    const down = await startTestApi(testConfig(database.url, { REDIS_URL: "redis://127.0.0.1:1" }));
    try {
      const sub = await down.call("POST", "/v1/subscriptions", { json: { url: "https://example.com/x", events: ["redis.down"] } });
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
