import { subscribe, type TestApi } from "@webhooks/api/testing";
import { describe, expect } from "vitest";
import {
  type CreateSubscriptionRequest,
  deletedSubscriptionSchema,
  subscriptionListSchema,
  subscriptionSchema,
} from "../src/subscriptions/schemas.ts";
import { apiTest } from "./fixtures.ts";

const test = apiTest();

const create = (api: TestApi, body: Partial<CreateSubscriptionRequest> = {}) =>
  subscribe(api, { events: ["invoice.paid"], ...body });

describe("POST /v1/subscriptions", () => {
  test("creates a subscription and returns its signing secret once", async ({ api, database }) => {
    const created = await create(api, { description: "billing", events: ["invoice.paid", "invoice.refunded"] });
    expect(created).toMatchObject({
      object: "subscription",
      url: "https://example.com/hooks",
      events: ["invoice.paid", "invoice.refunded"],
      description: "billing",
      active: true,
    });
    expect(created.id).toMatch(/^sub_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(created.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

    // No other response ever contains the secret.
    const fetched = await api.get(`/v1/subscriptions/${created.id}`, 200, { schema: subscriptionSchema });
    expect(fetched.body).not.toHaveProperty("secret");
    expect(JSON.stringify(fetched.body)).not.toContain(created.secret);
    const listed = await api.get("/v1/subscriptions", 200, { schema: subscriptionListSchema });
    expect(JSON.stringify(listed.body)).not.toContain(created.secret);
    const updated = await api.put(`/v1/subscriptions/${created.id}`, { active: false }, 200, {
      schema: subscriptionSchema,
    });
    expect(JSON.stringify(updated.body)).not.toContain(created.secret);
  });

  test("gives each subscription its own secret", async ({ api, database }) => {
    const a = await create(api);
    const b = await create(api);
    expect(a.secret).not.toBe(b.secret);
  });

  test("accepts * for every event type, defaults description to empty and active to true", async ({
    api,
    database,
  }) => {
    const created = await create(api, { events: ["*"] });
    expect(created.events).toEqual(["*"]);
    expect(created.description).toBe("");
    expect(created.active).toBe(true);
    expect((await create(api, { active: false })).active).toBe(false);
  });

  test.for([
    [{ events: ["invoice.paid"] }, "parameter_missing", "url"],
    [{ url: "https://example.com" }, "parameter_missing", "events"],
    [{ url: "https://example.com", events: [] }, "parameter_invalid", "events"],
    [{ url: "https://example.com", events: "invoice.paid" }, "parameter_invalid", "events"],
    [{ url: "https://example.com", events: ["has space"] }, "parameter_invalid", "events[0]"],
    [{ url: "not a url", events: ["a"] }, "url_invalid", "url"],
    [{ url: "ftp://example.com", events: ["a"] }, "url_invalid", "url"],
    // Urls that parse, but not into what they read as (core's urlSpellingProblem).
    [{ url: "https://user:secret@example.com/in", events: ["a"] }, "url_invalid", "url"],
    [{ url: "https://example.com\\@evil.example/", events: ["a"] }, "url_invalid", "url"],
    [{ url: "https:example.com/in", events: ["a"] }, "url_invalid", "url"],
    [{ url: " https://example.com/in", events: ["a"] }, "url_invalid", "url"],
    [{ url: "https://hooks.example.net:4201#@example.com/", events: ["a"] }, "url_invalid", "url"],
    [{ url: "https://example.com:0443/in", events: ["a"] }, "url_invalid", "url"],
    // Host names that parse but that DNS cannot look up: every attempt would fail.
    [{ url: `https://${"a".repeat(64)}.example.com/in`, events: ["a"] }, "url_invalid", "url"],
    [{ url: `https://${"abcd.".repeat(51)}com/in`, events: ["a"] }, "url_invalid", "url"],
    [{ url: "https://a..example.com/in", events: ["a"] }, "url_invalid", "url"],
    [{ url: "https://example.com", events: ["a"], active: "yes" }, "parameter_invalid", "active"],
    [{ url: "https://example.com", events: ["a"], description: 5 }, "parameter_invalid", "description"],
    [{ url: "https://example.com", events: ["a"], description: "x".repeat(1025) }, "parameter_invalid", "description"],
    [{ url: "https://example.com", events: ["a"], description: "nul\u0000" }, "parameter_invalid", "description"],
    [{ url: "https://example.com", events: ["a"], description: "lone \ud800" }, "parameter_invalid", "description"],
    [{ url: "https://example.com/\udfff", events: ["a"] }, "parameter_invalid", "url"],
    [{ url: "https://example.com", events: ["a"], colour: "red" }, "parameter_unknown", "colour"],
  ])("rejects %j with a 400 naming the parameter", async ([body, code, param], { api, database }) => {
    const response = await api.post("/v1/subscriptions", body, 400);
    expect(response.body.error).toMatchObject({ type: "invalid_request_error", code, param });
    expect(response.body.error.message).toEqual(expect.any(String));
    expect(response.body.error.request_id).toBe(response.headers["request-id"]);
  });
});

describe("GET /v1/subscriptions/{id}", () => {
  test("returns 404 in the error shape for an unknown or malformed id", async ({ api, database }) => {
    for (const id of ["sub_01JD5V6Y7Z8X9W0V1U2T3S4R5Q", "nope", "sub_%00"]) {
      const response = await api.get(`/v1/subscriptions/${id}`, 404);
      expect(response.body.error).toMatchObject({ type: "invalid_request_error", code: "resource_missing" });
    }
  });
});

describe("PUT /v1/subscriptions/{id}", () => {
  test("changes only the url when only the url is sent", async ({ api, database }) => {
    const created = await create(api, { description: "keep me", events: ["invoice.paid", "invoice.refunded"] });
    const response = await api.put(`/v1/subscriptions/${created.id}`, { url: "https://example.org/new" }, 200, {
      schema: subscriptionSchema,
    });
    expect(response.body).toEqual({
      id: created.id,
      object: "subscription",
      url: "https://example.org/new",
      events: ["invoice.paid", "invoice.refunded"],
      description: "keep me",
      active: true,
      created_at: created.created_at,
      max_in_flight: 25,
      rate_limit: null,
      headers: {},
      filter: null,
      signature_scheme: "hmac-sha256",
      ordering: "none",
      public_key: null,
      auth: null,
      client_certificate: null,
      health: {
        state: "healthy",
        consecutive_failures: 0,
        last_success_at: null,
        last_failure_at: null,
        retry_at: null,
      },
      disabled_reason: null,
    });
  });

  test("replaces the whole events list when events is sent", async ({ api, database }) => {
    const created = await create(api, { events: ["invoice.paid", "invoice.refunded"] });
    const response = await api.put(`/v1/subscriptions/${created.id}`, { events: ["invoice.payment_failed"] }, 200, {
      schema: subscriptionSchema,
    });
    expect(response.body.events).toEqual(["invoice.payment_failed"]);
    expect(response.body.url).toBe(created.url);
    expect(response.body.active).toBe(true);
  });

  test("pauses and resumes with active alone", async ({ api, database }) => {
    const created = await create(api);
    const paused = await api.put(`/v1/subscriptions/${created.id}`, { active: false }, 200, {
      schema: subscriptionSchema,
    });
    expect(paused.body).toMatchObject({ active: false, url: created.url, events: created.events });
    const resumed = await api.put(`/v1/subscriptions/${created.id}`, { active: true }, 200, {
      schema: subscriptionSchema,
    });
    expect(resumed.body.active).toBe(true);
  });

  test("applies all fields together", async ({ api, database }) => {
    const created = await create(api);
    const response = await api.call("PUT", `/v1/subscriptions/${created.id}`, {
      json: { url: "https://example.net/all", events: ["*"], active: false },
    });
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({
      url: "https://example.net/all",
      events: ["*"],
      active: false,
      description: created.description,
    });
    const fetched = await api.get(`/v1/subscriptions/${created.id}`, 200, { schema: subscriptionSchema });
    expect(fetched.body).toEqual(response.body);
  });

  test("treats {} as no change, and refuses a missing body (the OpenAPI document marks it required)", async ({
    api,
    database,
  }) => {
    const created = await create(api, { description: "same" });
    const { secret: _secret, ...expected } = created;
    const response = await api.put(`/v1/subscriptions/${created.id}`, {}, 200, { schema: subscriptionSchema });
    expect(response.body).toEqual(expected);
    for (const options of [{ body: "" }, {}]) {
      const missing = await api.call("PUT", `/v1/subscriptions/${created.id}`, options);
      expect(missing.status).toBe(400);
      expect(missing.body.error).toMatchObject({ type: "invalid_request_error", code: "body_missing" });
    }
  });

  test.for([
    ["description", { description: "new" }, "parameter_not_updatable"],
    ["secret", { secret: "whsec_AAAA" }, "parameter_not_updatable"],
    ["health", { health: { state: "healthy" } }, "parameter_not_updatable"],
    ["disabled_reason", { disabled_reason: null }, "parameter_not_updatable"],
    ["id", { id: "sub_x" }, "parameter_unknown"],
    ["foo", { foo: 1 }, "parameter_unknown"],
  ])("rejects %s with a 400 naming it", async ([param, body, code], { api, database }) => {
    const created = await create(api, { description: "untouched" });
    const response = await api.put(
      `/v1/subscriptions/${created.id}`,
      { active: false, ...(body as Record<string, unknown>) },
      400,
    );
    expect(response.body.error).toMatchObject({ type: "invalid_request_error", code, param });
    expect(response.body.error.message).toContain(param);
    // Nothing was applied.
    const fetched = await api.get(`/v1/subscriptions/${created.id}`, 200, { schema: subscriptionSchema });
    expect(fetched.body).toMatchObject({ active: true, description: "untouched" });
  });

  test.for([
    [{ events: [] }, "events"],
    [{ events: ["ok", "not ok"] }, "events[1]"],
    [{ active: "false" }, "active"],
    [{ active: null }, "active"],
    [{ url: "https://" }, "url"],
    [{ url: 42 }, "url"],
  ])("rejects an invalid value %j", async ([body, param], { api, database }) => {
    const created = await create(api);
    const response = await api.put(`/v1/subscriptions/${created.id}`, body, 400);
    expect(response.body.error.param).toBe(param);
  });

  test("returns 404 for an unknown id", async ({ api, database }) => {
    const response = await api.put("/v1/subscriptions/sub_01JD5V6Y7Z8X9W0V1U2T3S4R5Q", { active: false }, 404);
    expect(response.body.error).toMatchObject({ code: "resource_missing", param: "subscription_id" });
  });

  test("returns 415 for a body that is not JSON, and 400 for malformed JSON", async ({ api, database }) => {
    const created = await create(api);
    const text = await api.call("PUT", `/v1/subscriptions/${created.id}`, {
      body: "active=false",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(text.status).toBe(415);
    expect(text.body.error).toMatchObject({ type: "invalid_request_error", code: "unsupported_media_type" });
    const noType = await api.call("PUT", `/v1/subscriptions/${created.id}`, { body: '{"active":false}' });
    expect(noType.status).toBe(415);
    const malformed = await api.call("PUT", `/v1/subscriptions/${created.id}`, {
      body: '{"active":',
      headers: { "content-type": "application/json" },
    });
    expect(malformed.status).toBe(400);
    expect(malformed.body.error.code).toBe("invalid_json");
    const array = await api.call("PUT", `/v1/subscriptions/${created.id}`, {
      body: "[]",
      headers: { "content-type": "application/json" },
    });
    expect(array.status).toBe(400);
    expect((await api.get(`/v1/subscriptions/${created.id}`, 200, { schema: subscriptionSchema })).body.active).toBe(
      true,
    );
  });
});

describe("ordering", () => {
  test('defaults to "none", is set on create and PUT, and is on every read', async ({ api, database }) => {
    const plain = await create(api);
    expect(plain.ordering).toBe("none");
    const fifo = await create(api, { ordering: "fifo" });
    expect(fifo.ordering).toBe("fifo");
    expect((await api.get(`/v1/subscriptions/${fifo.id}`, 200, { schema: subscriptionSchema })).body.ordering).toBe(
      "fifo",
    );
    const list = await api.get("/v1/subscriptions?limit=100", 200, { schema: subscriptionListSchema });
    const mine = list.body.data.filter((s) => s.id === fifo.id || s.id === plain.id);
    expect(mine.map((s) => [s.id, s.ordering])).toEqual([
      [fifo.id, "fifo"],
      [plain.id, "none"],
    ]);
    const switched = await api.put(`/v1/subscriptions/${fifo.id}`, { ordering: "none" }, 200, {
      schema: subscriptionSchema,
    });
    expect(switched.body).toMatchObject({ ordering: "none", url: fifo.url, events: fifo.events });
    const back = await api.put(`/v1/subscriptions/${plain.id}`, { ordering: "fifo" }, 200, {
      schema: subscriptionSchema,
    });
    expect(back.body.ordering).toBe("fifo");
  });

  test("refuses any other value, in the error shape, naming the field", async ({ api, database }) => {
    for (const ordering of ["FIFO", "lifo", null, 1]) {
      const created = await api.call("POST", "/v1/subscriptions", {
        json: { url: "https://example.com/hooks", events: ["*"], ordering },
      });
      expect(created.status).toBe(400);
      expect(created.body.error).toMatchObject({
        type: "invalid_request_error",
        code: "parameter_invalid",
        param: "ordering",
        message: 'ordering must be "none" or "fifo"',
      });
    }
    const existing = await create(api);
    const updated = await api.call("PUT", `/v1/subscriptions/${existing.id}`, { json: { ordering: "random" } });
    expect(updated.status).toBe(400);
    expect(updated.body.error).toMatchObject({ code: "parameter_invalid", param: "ordering" });
  });
});

describe("GET /v1/subscriptions", () => {
  test("lists newest first with cursor paging and no gaps", async ({ api, database }) => {
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push((await create(api)).id);
    const seen: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const response = await api.call("GET", `/v1/subscriptions?limit=3${cursor ? `&starting_after=${cursor}` : ""}`);
      expect(response.status).toBe(200);
      expect(response.body).toMatchObject({ object: "list", url: "/v1/subscriptions" });
      seen.push(...response.body.data.map((s: { id: string }) => s.id));
      if (!response.body.has_more) break;
      cursor = response.body.data.at(-1).id;
    }
    expect(new Set(seen).size).toBe(seen.length);
    const newestFirst = [...ids].reverse();
    expect(seen.filter((id) => ids.includes(id))).toEqual(newestFirst);
  });

  test("rejects bad limits", async ({ api, database }) => {
    for (const limit of ["0", "101", "1.5", "abc"]) {
      const response = await api.get(`/v1/subscriptions?limit=${limit}`, 400);
      expect(response.body.error.param).toBe("limit");
    }
  });
});

describe("DELETE /v1/subscriptions/{id}", () => {
  test("soft-deletes: gone from reads, still 404 on a second delete", async ({ api, database }) => {
    const created = await create(api);
    const deleted = await api.delete(`/v1/subscriptions/${created.id}`, 200, { schema: deletedSubscriptionSchema });
    expect(deleted.body).toEqual({ id: created.id, object: "subscription", deleted: true });
    await api.get(`/v1/subscriptions/${created.id}`, 404);
    await api.put(`/v1/subscriptions/${created.id}`, { active: true }, 404);
    await api.delete(`/v1/subscriptions/${created.id}`, 404);
    const listed = await api.get("/v1/subscriptions?limit=100", 200, { schema: subscriptionListSchema });
    expect(listed.body.data.map((s: { id: string }) => s.id)).not.toContain(created.id);
  });
});
