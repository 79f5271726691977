import { startTestApi } from "@webhooks/api/testing";
import { startTcpProxy, TEST_API_KEY, testConfig } from "@webhooks/testing";
import { describe, expect, vi } from "vitest";
import { deliveryListSchema } from "../src/deliveries/schemas.ts";
import { AUTH_FAILURE_LIMIT, AuthFailureThrottle, MAX_TRACKED_ADDRESSES } from "../src/http/auth-throttle.ts";
import { apiTest } from "./fixtures.ts";

const test = apiTest();

function expectErrorShape(response: { body: { error: Record<string, unknown> }; headers: Record<string, string> }) {
  expect(response.body.error).toMatchObject({
    type: expect.any(String),
    code: expect.any(String),
    message: expect.any(String),
  });
  expect(response.body.error.request_id).toMatch(/^req_/);
  expect(response.body.error.request_id).toBe(response.headers["request-id"]);
}

function withPort(url: string, newPort: number): string {
  const parsed = new URL(url);
  parsed.port = String(newPort);
  return parsed.toString();
}

/** Failed authentication is throttled per address, and /metrics can be put behind a token. */
describe("failed authentication is throttled; /metrics can be protected", () => {
  test("answers 429 with Retry-After after 20 wrong keys from one address; a right key still passes", async ({
    api,
    database,
  }) => {
    const own = await startTestApi(testConfig(database.url));
    try {
      for (let i = 0; i < 20; i++)
        expect((await own.call("GET", "/v1/deliveries", { key: `wrong-${i}` })).status).toBe(401);
      const throttled = await own.call("GET", "/v1/deliveries", { key: "wrong-again" });
      expect(throttled.status).toBe(429);
      expect(throttled.body.error).toMatchObject({ type: "rate_limit_error", code: "too_many_failed_authentications" });
      expect(Number(throttled.headers["retry-after"])).toBeGreaterThanOrEqual(1);
      expectErrorShape(throttled);
      await own.get("/v1/deliveries", 429, { key: null });
      await own.get("/v1/deliveries", 200, { schema: deliveryListSchema });
      expect((await own.call("GET", "/healthz", { key: null })).status).toBe(200);
    } finally {
      await own.close();
    }
  });

  test("locks Bull Board for an address after 20 wrong passwords, right password included", async ({
    api,
    database,
  }) => {
    const own = await startTestApi(testConfig(database.url, { ADMIN_USERNAME: "admin", ADMIN_PASSWORD: "s3cret" }));
    const basic = (password: string) => ({
      authorization: `Basic ${Buffer.from(`admin:${password}`).toString("base64")}`,
    });
    try {
      expect((await own.call("GET", "/admin/queues", { key: null, headers: basic("s3cret") })).status).toBe(200);
      for (let i = 0; i < 20; i++)
        expect((await own.call("GET", "/admin/queues", { key: null, headers: basic(`guess${i}`) })).status).toBe(401);
      const locked = await own.call("GET", "/admin/queues", { key: null, headers: basic("s3cret") });
      expect(locked.status).toBe(429);
      expect(locked.headers["retry-after"]).toBeDefined();
      expectErrorShape(locked);
    } finally {
      await own.close();
    }
  });

  test("counts an IPv6 client by its /64, and an IPv4-mapped address as the IPv4 address", () => {
    const throttle = new AuthFailureThrottle();
    // Every failure from another address of the same /64 counts against the same limit.
    for (let i = 1; i <= AUTH_FAILURE_LIMIT; i++)
      expect(throttle.recordFailure(`2001:db8:1:2::${i.toString(16)}`)).toBe(0);
    expect(throttle.recordFailure("2001:db8:1:2:ffff:ffff:ffff:ffff")).toBeGreaterThan(0);
    expect(throttle.retryAfterSeconds("2001:db8:1:2::abcd")).toBeGreaterThan(0);
    expect(throttle.retryAfterSeconds("2001:db8:1:3::1")).toBe(0);

    // A dual-stack socket reports IPv4 clients as ::ffff:a.b.c.d: the same client either way, and
    // not one /64 (::ffff:0:0/96 would otherwise hold every IPv4 client).
    for (let i = 0; i < AUTH_FAILURE_LIMIT; i++) throttle.recordFailure(i % 2 === 0 ? "::ffff:192.0.2.7" : "192.0.2.7");
    expect(throttle.recordFailure("::ffff:192.0.2.7")).toBeGreaterThan(0);
    expect(throttle.retryAfterSeconds("192.0.2.7")).toBeGreaterThan(0);
    expect(throttle.retryAfterSeconds("::ffff:192.0.2.8")).toBe(0);
    expect(throttle.retryAfterSeconds("192.0.2.8")).toBe(0);
  });

  test("makes room by dropping the oldest addresses, so failing from many addresses resets no one else's count", () => {
    const throttle = new AuthFailureThrottle();
    const lockOut = (address: string) => {
      for (let i = 0; i <= AUTH_FAILURE_LIMIT; i++) throttle.recordFailure(address);
    };
    const filler = (i: number) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
    lockOut("198.51.100.1");
    for (let i = 0; i < MAX_TRACKED_ADDRESSES - 2; i++) throttle.recordFailure(filler(i));
    lockOut("198.51.100.2");
    // The table is full: one new address drops the oldest entry, and only that one.
    throttle.recordFailure("203.0.113.1");
    expect(throttle.retryAfterSeconds("198.51.100.1")).toBe(0);
    expect(throttle.retryAfterSeconds("198.51.100.2")).toBeGreaterThan(0);
    for (let i = 0; i < 1_000; i++) throttle.recordFailure(`172.16.${i >> 8}.${i & 255}`);
    expect(throttle.retryAfterSeconds("198.51.100.2")).toBeGreaterThan(0);
  });

  test("counts an address whose window began again as the newest, not by when it was first seen", () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      const throttle = new AuthFailureThrottle();
      throttle.recordFailure("198.51.100.1");
      throttle.recordFailure("198.51.100.9");
      vi.setSystemTime(Date.now() + throttle.windowMs + 1);
      // Its first window is over; failing again now starts a new one, and locks it out.
      for (let i = 0; i <= AUTH_FAILURE_LIMIT; i++) throttle.recordFailure("198.51.100.1");
      for (let i = 0; i < MAX_TRACKED_ADDRESSES - 2; i++)
        throttle.recordFailure(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
      // Full: room for one more is made from the entry whose window began first, .9's.
      throttle.recordFailure("203.0.113.1");
      expect(throttle.retryAfterSeconds("198.51.100.1")).toBeGreaterThan(0);
    } finally {
      vi.useRealTimers();
    }
  });

  test("looks a wrong key up in PostgreSQL at most once, and a malformed one never", async ({ api, database }) => {
    const target = new URL(database.url);
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    const own = await startTestApi(testConfig(withPort(database.url, proxy.port)));
    const wellFormed = (c: string) => `whk_${c.repeat(43)}`;
    try {
      expect((await own.call("GET", "/v1/deliveries", { key: wellFormed("A") })).status).toBe(401);
      await proxy.refuse();
      // PostgreSQL is gone: only a key that needs a query can tell.
      expect((await own.call("GET", "/v1/deliveries", { key: wellFormed("A") })).status).toBe(401);
      expect((await own.call("GET", "/v1/deliveries", { key: "whk_short" })).status).toBe(401);
      expect((await own.call("GET", "/v1/deliveries", { key: wellFormed("B") })).status).toBe(503);
    } finally {
      await own.close();
    }
  });

  test("puts /metrics behind METRICS_TOKEN when it is set", async ({ api, database }) => {
    const own = await startTestApi(testConfig(database.url, { METRICS_TOKEN: "metrics-token-123" }));
    try {
      for (const headers of [
        {},
        { authorization: "Bearer nope" },
        { authorization: `Bearer ${TEST_API_KEY}` },
      ] as Record<string, string>[]) {
        const response = await own.call("GET", "/metrics", { key: null, headers });
        expect(response.status).toBe(401);
        expect(response.body.error).toMatchObject({ type: "authentication_error", code: "metrics_token_invalid" });
        expectErrorShape(response);
      }
      const allowed = await own.call("GET", "/metrics", {
        key: null,
        headers: { authorization: "Bearer metrics-token-123" },
      });
      expect(allowed.status).toBe(200);
      expect(allowed.body).toContain("webhook_api_request_duration_seconds");
      expect((await own.call("GET", "/healthz", { key: null })).status).toBe(200);
    } finally {
      await own.close();
    }
  });
});
