import { subscribe } from "@webhooks/api/testing";
import { describe, expect } from "vitest";
import { apiTest } from "./fixtures.ts";

// The messages of the API's 400s and 401s are sentences in our words that name the field and say
// what it must be, never the schema library's defaults ("Too small: expected array to have >=1
// items"): docs/api.md#errors.
const test = apiTest();
/** A second API, that refuses plain http as production does by default. */
const strict = apiTest({ env: { ALLOW_HTTP_URLS: "false" } });

/** Phrases of zod's own messages, which must not reach a client. */
const LIBRARY_WORDING = /Invalid input|Too (small|big)|expected \w+ to have|received \w+|Invalid option|>=|<=/;

const url = "https://example.com/hooks";

describe("validation messages", () => {
  const cases: [method: string, path: string, body: unknown, param: string, message: string][] = [
    ["POST", "/v1/subscriptions", { url: 5, events: ["a"] }, "url", "url must be a string"],
    ["POST", "/v1/subscriptions", { url: null, events: ["a"] }, "url", "url must be a string, not null"],
    [
      "POST",
      "/v1/subscriptions",
      { url: `${url}/${"x".repeat(2100)}`, events: ["a"] },
      "url",
      "url must be at most 2048 characters long",
    ],
    ["POST", "/v1/subscriptions", { url, events: [] }, "events", "events must list at least 1 item"],
    ["POST", "/v1/subscriptions", { url, events: "a" }, "events", "events must be an array"],
    ["POST", "/v1/subscriptions", { url, events: [5] }, "events[0]", "events[0] must be a string"],
    ["POST", "/v1/subscriptions", { url, events: [""] }, "events[0]", "events[0] must not be empty"],
    [
      "POST",
      "/v1/subscriptions",
      { url, events: ["bad type!"] },
      "events[0]",
      "events[0] must contain only letters, digits and _ - . :",
    ],
    [
      "POST",
      "/v1/subscriptions",
      { url, events: Array.from({ length: 257 }, (_, i) => `type.${i}`) },
      "events",
      "events must list at most 256 items",
    ],
    [
      "POST",
      "/v1/subscriptions",
      { url, events: ["a"], description: 5 },
      "description",
      "description must be a string",
    ],
    [
      "POST",
      "/v1/subscriptions",
      { url, events: ["a"], description: "x".repeat(1025) },
      "description",
      "description must be at most 1024 characters long",
    ],
    ["POST", "/v1/subscriptions", { url, events: ["a"], active: "yes" }, "active", "active must be true or false"],
    ["POST", "/v1/events", { type: 5, data: {} }, "type", "type must be a string"],
    ["POST", "/v1/events", { type: "", data: {} }, "type", "type must not be empty"],
    ["POST", "/v1/events", { type: "x".repeat(256), data: {} }, "type", "type must be at most 255 characters long"],
    [
      "POST",
      "/v1/events",
      { type: "bad type", data: {} },
      "type",
      "type must contain only letters, digits and _ - . :",
    ],
    ["POST", "/v1/events", { type: "a", data: [] }, "data", "data must be a JSON object"],
  ];
  test.for(cases.map(([method, path, body, param, message]) => ({ method, path, body, param, message })))(
    "$method $path: $message",
    async ({ method, path, body, param, message }, { api }) => {
      const response = await api.call(method, path, { json: body });
      expect(response.status).toBe(400);
      expect(response.body).toMatchObject({ error: { type: "invalid_request_error", param, message } });
    },
  );

  test("say what a query parameter must be", async ({ api }) => {
    for (const [query, param, message] of [
      [`subscription_id=${"x".repeat(65)}`, "subscription_id", "subscription_id must be at most 64 characters long"],
      [`event=${"x".repeat(256)}`, "event", "event must be at most 255 characters long"],
      [`starting_after=${"x".repeat(65)}`, "starting_after", "starting_after must be at most 64 characters long"],
    ]) {
      const response = await api.get(`/v1/deliveries?${query}`, 400);
      expect(response.body.error).toMatchObject({ param, message });
    }
  });

  test("say it in an update too", async ({ api }) => {
    const subscription = await subscribe(api);
    const path = `/v1/subscriptions/${subscription.id}`;
    expect((await api.put(path, { events: [] }, 400)).body.error.message).toBe("events must list at least 1 item");
    expect((await api.put(path, { active: null }, 400)).body.error.message).toBe(
      "active must be true or false, not null",
    );
  });

  test("never use the schema library's wording, whatever the mistake", async ({ api }) => {
    const subscription = await subscribe(api);
    const mistakes: [string, string, unknown][] = [
      ["POST", "/v1/subscriptions", { url: [], events: {} }],
      ["POST", "/v1/subscriptions", { url, events: [null] }],
      ["POST", "/v1/subscriptions", { url, events: [["a"]] }],
      ["POST", "/v1/subscriptions", { url, events: ["a"], max_in_flight: "10" }],
      ["POST", "/v1/subscriptions", { url, events: ["a"], rate_limit: 1.5 }],
      ["POST", "/v1/subscriptions", { url, events: ["a"], headers: { "X-A": 5 } }],
      ["POST", "/v1/subscriptions", { url, events: ["a"], tenant_id: 5 }],
      ["PUT", `/v1/subscriptions/${subscription.id}`, { url: 5 }],
      ["PUT", `/v1/subscriptions/${subscription.id}`, { headers: null }],
      ["POST", `/v1/subscriptions/${subscription.id}/rotate_secret`, { overlap: null }],
      ["POST", `/v1/subscriptions/${subscription.id}/recover`, { since: [] }],
      ["POST", `/v1/subscriptions/${subscription.id}/test`, { type: [], data: 5 }],
      ["POST", "/v1/events", { type: null, data: null }],
      ["POST", "/v1/events", { type: "a", data: {}, tenant_id: "" }],
      ["POST", "/v1/portal_sessions", { tenant_id: 5 }],
      ["POST", "/v1/portal_sessions", { tenant_id: "acme", expires_in: 60 }],
    ];
    for (const [method, path, json] of mistakes) {
      const response = await api.call(method, path, { json });
      expect({ method, path, json, status: response.status }).toMatchObject({ status: 400 });
      const { message, param } = (response.body as { error: { message: string; param?: string } }).error;
      expect({ json, message }).not.toMatchObject({ message: expect.stringMatching(LIBRARY_WORDING) });
      // The message names the field it is about.
      if (param !== undefined) expect({ json, message }).toMatchObject({ message: expect.stringContaining(param) });
    }
    for (const query of ["status=sent", "limit=x", "since=yesterday", "response_code=6xx", "tenant_id=a%20b"]) {
      const { message } = (await api.get(`/v1/deliveries?${query}`, 400)).body.error;
      expect({ query, message }).not.toMatchObject({ message: expect.stringMatching(LIBRARY_WORDING) });
    }
  });
});

describe("webhook urls", () => {
  test("say which schemes this deployment takes: http or https in development", async ({ api }) => {
    const response = await api.post("/v1/subscriptions", { url: "ftp://example.com/hooks", events: ["a"] }, 400);
    expect(response.body.error).toMatchObject({
      code: "url_invalid",
      param: "url",
      message: "url must start with https:// or http://",
    });
  });
});

describe("webhook urls where plain http is refused, as in production", () => {
  strict("say that only https is taken", async ({ api }) => {
    const ftp = await api.post("/v1/subscriptions", { url: "ftp://example.com/hooks", events: ["a"] }, 400);
    expect(ftp.body.error.message).toBe("url must start with https://");
    const http = await api.post("/v1/subscriptions", { url: "http://example.com/hooks", events: ["a"] }, 400);
    expect(http.body.error.message).toBe(
      "url must start with https:// (this deployment does not accept plain http://)",
    );
  });
});

describe("the Authorization header", () => {
  test.for<[string | undefined, string]>([
    [undefined, "No API key provided."],
    ["whk_0123456789", "The Authorization header is missing the word Bearer before the key."],
    ["Basic YWRtaW46czNjcmV0", "The Authorization header uses the Basic scheme."],
    ["Bearer", "The Authorization header says Bearer but gives no key after it."],
    ["Bearer k3y m0re", "The Authorization header must hold one key after Bearer."],
    ["devkey something", "The Authorization header uses another scheme than Bearer."],
  ])("%j: says what is wrong and how to send a key, without repeating it", async ([header, problem], { api }) => {
    const response = await api.call("GET", "/v1/deliveries", {
      key: null,
      headers: header === undefined ? {} : { authorization: header },
    });
    expect(response.status).toBe(401);
    const { code, message } = (response.body as { error: { code: string; message: string } }).error;
    expect(code).toBe("api_key_missing");
    expect(message).toBe(`${problem} Send the API key as \`Authorization: Bearer <key>\`.`);
    // What was sent may have been a key: it is never echoed.
    for (const part of (header ?? "").split(" ").filter((word) => word !== "" && !["Bearer", "Basic"].includes(word))) {
      expect(message).not.toContain(part);
    }
  });
});
