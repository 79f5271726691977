import { checkResponse, publish, subscribe } from "@webhooks/api/testing";
import { expect } from "vitest";
import { deliveryListSchema } from "../src/deliveries/schemas.ts";
import { eventTypeSchema } from "../src/event-types/schemas.ts";
import { errorSchema } from "../src/http/schemas.ts";
import { apiTest } from "./fixtures.ts";

/**
 * "No client input may produce a 500": a seeded stream of hostile requests against every route.
 * Each must get a non-5xx answer, and every error must be in the error shape.
 */
interface SeedIds {
  sub: string;
  evt: string;
  dlv: string;
}

/** One subscription, event and delivery, whose ids the routes below take. */
const test = apiTest().extend("ids", { scope: "file" }, async ({ api }): Promise<SeedIds> => {
  const sub = await subscribe(api, { url: "https://example.com/x", events: ["*"] });
  const event = await publish(api, { type: "seed.event", data: { a: 1 } });
  await api.post("/v1/event-types", { name: "seed.typed", schema: { required: ["a"] } }, 201, {
    schema: eventTypeSchema,
  });
  const deliveries = await api.get("/v1/deliveries", 200, { schema: deliveryListSchema });
  return { sub: sub.id, evt: event.id, dlv: deliveries.body.data[0]!.id };
});

/** A small deterministic PRNG, so a failure can be replayed. */
function prng(seed: number) {
  return () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x7fffffff;
  };
}

const nasty = [
  "",
  " ",
  "0",
  "-1",
  "1.5",
  "1e999",
  "NaN",
  "null",
  "true",
  "[]",
  "{}",
  "%00",
  "%ED%A0%80",
  "%E0%A4%A",
  "%FF",
  "\u0000",
  "\ud800",
  "😀",
  "a".repeat(5000),
  "0000-01-01T00:00:00Z",
  "9999-12-31T23:59:59Z",
  "2026-02-30T00:00:00Z",
  "dlv_00000000000000000000000000",
  "sub_ZZZZZZZZZZZZZZZZZZZZZZZZZZ",
  "../../etc/passwd",
  "' OR 1=1 --",
  "*",
  "queued",
];
const jsonValues: unknown[] = [
  null,
  true,
  0,
  -1,
  1.5,
  1e308,
  "",
  "x",
  "\u0000",
  "\ud800",
  [],
  [1],
  {},
  { a: null },
  "a".repeat(3000),
  "https://example.com",
  ["*"],
  ["\ud800"],
  { k: "\ud800" },
  { "\udc00": 1 },
  { k: "\u0000" },
  { nested: { deeper: [{ x: "\ud83d" }] } },
  "http://[::1]:1/x",
];
/** Each route with a valid body, so that one mutated field gets past the rest of the validation. */
const routes: [string, (ids: SeedIds, r: () => number) => string, Record<string, unknown> | undefined][] = [
  ["GET", () => "/v1/deliveries", undefined],
  ["GET", (ids) => `/v1/deliveries/${ids.dlv}`, undefined],
  ["GET", (ids) => `/v1/deliveries/${ids.dlv}/attempts`, undefined],
  ["POST", (ids) => `/v1/deliveries/${ids.dlv}/retry`, {}],
  ["GET", () => "/v1/subscriptions", undefined],
  ["POST", () => "/v1/subscriptions", { url: "https://example.com/x", events: ["a.b"], description: "d" }],
  ["GET", (ids) => `/v1/subscriptions/${ids.sub}`, undefined],
  ["PUT", (ids) => `/v1/subscriptions/${ids.sub}`, { url: "https://example.com/y", events: ["*"], active: true }],
  [
    "DELETE",
    (ids, r) => (r() < 0.9 ? "/v1/subscriptions/sub_01JD5V6Y7Z8X9W0V1U2T3S4R5Q" : `/v1/subscriptions/${ids.sub}`),
    undefined,
  ],
  ["POST", () => "/v1/events", { type: "a.b", data: { k: "v" } }],
  ["POST", () => "/v1/events", { type: "seed.typed", data: { a: 1 } }],
  ["GET", (ids) => `/v1/events/${ids.evt}`, undefined],
  ["POST", () => "/v1/subscriptions", { url: "https://example.com/x", events: ["*"], filter: { data: { a: 1 } } }],
  ["PUT", (ids) => `/v1/subscriptions/${ids.sub}`, { filter: { type: { $startsWith: "a" }, data: { n: { $gt: 1 } } } }],
  ["GET", () => "/v1/event-types", undefined],
  ["POST", () => "/v1/event-types", { name: "x.y", schema: { type: "object" }, examples: [{}] }],
  [
    "GET",
    (_, r) => `/v1/event-types/${r() < 0.5 ? "seed.typed" : encode(nasty[Math.floor(r() * nasty.length)]!)}`,
    undefined,
  ],
  ["PUT", () => "/v1/event-types/seed.typed", { description: "d", schema: { required: ["a"] }, deprecated: false }],
  ["DELETE", (_, r) => (r() < 0.9 ? "/v1/event-types/no.such" : "/v1/event-types/seed.typed"), undefined],
];
/** Percent-encodes a value; one that cannot be (a lone surrogate) goes as its raw UTF-8 escape. */
function encode(value: string): string {
  try {
    return value.startsWith("%") ? value : encodeURIComponent(value);
  } catch {
    return "%ED%A0%80";
  }
}

const params = [
  "limit",
  "since",
  "until",
  "status",
  "event",
  "subscription_id",
  "starting_after",
  "ending_before",
  "include_archived",
  "x",
];
const fields = [
  "url",
  "events",
  "active",
  "description",
  "type",
  "data",
  "secret",
  "id",
  "filter",
  "name",
  "schema",
  "examples",
  "deprecated",
];

test("answers every hostile request without a 5xx, in the error shape", async ({ api, ids }) => {
  const random = prng(20261122);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
  for (let i = 0; i < 900; i++) {
    const [method, path, valid] = pick(routes);
    const query = Array.from({ length: Math.floor(random() * 3) }, () => `${pick(params)}=${encode(pick(nasty))}`).join(
      "&",
    );
    const url = `${path(ids, random)}${query ? `?${query}` : ""}`;
    let body: string | undefined;
    if (valid) {
      const shape = random();
      if (shape < 0.5) {
        // A valid body with one field replaced, or one nested value made hostile.
        const mutated: Record<string, unknown> = { ...valid };
        const field = random() < 0.8 && Object.keys(valid).length > 0 ? pick(Object.keys(valid)) : pick(fields);
        mutated[field] =
          random() < 0.5
            ? pick(jsonValues)
            : { nested: pick(jsonValues), [String(pick(jsonValues))]: pick(jsonValues) };
        body = JSON.stringify(mutated);
      } else if (shape < 0.75) {
        body = JSON.stringify(
          Object.fromEntries(Array.from({ length: Math.floor(random() * 4) }, () => [pick(fields), pick(jsonValues)])),
        );
      } else if (shape < 0.85) {
        body = JSON.stringify(pick(jsonValues));
      } else {
        body = pick(nasty);
      }
    }
    const contentType =
      random() < 0.85
        ? "application/json"
        : pick(["text/plain", "application/x-www-form-urlencoded", "application/json; charset=utf-16", ""]);
    const headers: Record<string, string> = contentType ? { "content-type": contentType } : {};
    if (method === "POST" && random() < 0.3) headers["idempotency-key"] = pick(["k", "", "x".repeat(300), "é"]);
    const response = await api.call(method, url, body === undefined ? { headers } : { body, headers });
    expect(response.status, `${method} ${url} ${body ?? ""}`).toBeLessThan(500);
    if (response.status >= 400) {
      expect(response.body.error, `${method} ${url}`).toMatchObject({
        type: expect.any(String),
        code: expect.any(String),
        message: expect.any(String),
      });
      // And nothing beyond the documented shape (no stack, no SQL).
      checkResponse(`${method} ${url}`, response, response.status, errorSchema);
    }
  }
});
