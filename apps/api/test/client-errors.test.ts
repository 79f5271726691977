import { describe, expect } from "vitest";
import { client } from "./client-fixtures.ts";
import { apiTest } from "./fixtures.ts";

/** The typed client (packages/client) on the errors every operation can answer, in the documented shape. */

const test = apiTest();

describe("the typed client, on errors", () => {
  test("request bodies: 415 when not sent as JSON, 413 when over the limit", async ({ api }) => {
    const notJson = await client(api).POST("/v1/events", {
      body: { type: "invoice.paid", data: {} },
      headers: { "content-type": "text/plain" },
    });
    expect(notJson.response.status).toBe(415);
    expect(notJson.error?.error.code).toBe("unsupported_media_type");

    const tooLarge = await client(api).POST("/v1/events", {
      body: { type: "invoice.paid", data: { blob: "x".repeat(api.config.bodyLimitBytes) } },
    });
    expect(tooLarge.response.status).toBe(413);
    expect(tooLarge.error?.error.code).toBe("body_too_large");
  });

  test("authentication: 401 for a wrong key, and 429 with Retry-After once an address fails too often", async ({
    api,
  }) => {
    const wrong = client(api, "not_a_key");
    const refused = await wrong.GET("/v1/deliveries");
    expect(refused.response.status).toBe(401);
    expect(refused.error?.error).toMatchObject({ type: "authentication_error", code: "api_key_invalid" });

    let throttled = refused;
    for (let i = 0; i < 30 && throttled.response.status !== 429; i++) throttled = await wrong.GET("/v1/deliveries");
    expect(throttled.response.status).toBe(429);
    expect(throttled.error?.error).toMatchObject({ type: "rate_limit_error", code: "too_many_failed_authentications" });
    expect(Number(throttled.response.headers.get("retry-after"))).toBeGreaterThan(0);
  });
});
