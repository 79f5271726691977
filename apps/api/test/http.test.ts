import { execFile } from "node:child_process";
import { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { startTestApi } from "@webhooks/api/testing";
import { TEST_API_KEY, testConfig, testEnv } from "@webhooks/testing";
import { request } from "undici";
import { describe, expect } from "vitest";
import { subscriptionListSchema } from "../src/subscriptions/schemas.ts";
import { apiTest } from "./fixtures.ts";

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL("../../../", import.meta.url));

/** Moves the API-key cache's clock forward, instead of waiting for its entries to expire. */
let clockSkewMs = 0;

const test = apiTest({
  env: { ADMIN_USERNAME: "admin", ADMIN_PASSWORD: "s3cret", BODY_LIMIT_BYTES: "2048" },
  clock: () => Date.now() + clockSkewMs,
});

function expectErrorShape(body: { error: Record<string, unknown> }, headers: Record<string, string>) {
  expect(body.error).toMatchObject({ type: expect.any(String), code: expect.any(String), message: expect.any(String) });
  expect(body.error.request_id).toMatch(/^req_/);
  expect(body.error.request_id).toBe(headers["request-id"]);
}

describe("authentication", () => {
  test("answers 401 without a key, with a wrong key and with a malformed header", async ({ api, database }) => {
    const attempts: Record<string, string>[] = [
      {},
      { authorization: "Bearer wrong-key" },
      { authorization: `Basic ${TEST_API_KEY}` },
      { authorization: "Bearer" },
    ];
    for (const headers of attempts) {
      const response = await api.call("GET", "/v1/deliveries", { key: null, headers });
      expect(response.status).toBe(401);
      expect(response.body.error.type).toBe("authentication_error");
      expectErrorShape(response.body, response.headers);
    }
    const missing = await api.call("GET", "/v1/subscriptions", { key: null });
    expect(missing.body.error.code).toBe("api_key_missing");
    const wrong = await api.call("POST", "/v1/events", {
      key: "whk_not_a_real_key_at_all_0000000000000000000",
      json: { type: "a", data: {} },
    });
    expect(wrong.body.error.code).toBe("api_key_invalid");
  });

  test("accepts keys created with the CLI until they are revoked", async ({ api, database }) => {
    const env = { ...process.env, ...testEnv(database.url), LOG_LEVEL: "silent" };
    const created = await run("npm", ["run", "--silent", "keys", "--", "create", "--name", "ci-test"], {
      cwd: ROOT,
      env,
    });
    const key = created.stdout.trim();
    expect(key).toMatch(/^whk_[A-Za-z0-9_-]{43}$/);
    expect(created.stderr).toMatch(/Created key_/);

    expect((await api.call("GET", "/v1/deliveries", { key })).status).toBe(200);

    const listed = await run("npm", ["run", "--silent", "keys", "--", "list"], { cwd: ROOT, env });
    expect(listed.stdout).toContain("ci-test");
    expect(listed.stdout).toContain(key.slice(0, 12));
    expect(listed.stdout).not.toContain(key);
    const id = /(key_[0-9A-Z]{26})/.exec(listed.stdout)?.[1];
    expect(id).toBeDefined();

    const revoked = await run("npm", ["run", "--silent", "keys", "--", "revoke", id!], { cwd: ROOT, env });
    expect(revoked.stdout).toContain(`Revoked ${id}`);
    // The API trusts a stored key for a few seconds between checks: let that time pass.
    clockSkewMs += 60_000;
    const after = await api.call("GET", "/v1/deliveries", { key });
    expect(after.status).toBe(401);
    expect(after.body.error.code).toBe("api_key_invalid");
  });

  test("needs no key for health, docs and metrics", async ({ api, database }) => {
    for (const path of ["/healthz", "/readyz", "/openapi.json", "/docs", "/metrics"]) {
      expect((await api.call("GET", path, { key: null })).status, path).toBe(200);
    }
  });
});

describe("caching", () => {
  test("marks every /v1 answer cache-control: no-store, errors included, and nothing else", async ({
    api,
    database,
  }) => {
    const created = await api.call("POST", "/v1/subscriptions", {
      json: { url: "https://example.com/hooks", events: ["*"] },
    });
    const answers = [
      created,
      await api.call("GET", "/v1/deliveries"),
      await api.call("POST", `/v1/subscriptions/${created.body.id}/rotate_secret`, { json: {} }),
      await api.call("POST", "/v1/portal_sessions", { json: { tenant_id: "acme" } }),
      await api.call("POST", "/v1/events", { json: { type: "cache.test", data: {} } }),
      await api.call("GET", "/v1/deliveries?limit=0"),
      await api.call("GET", "/v1/deliveries", { key: null }),
      await api.call("GET", "/v1/subscriptions/sub_01JD5V6Y7Z8X9W0V1U2T3S4R5Q"),
      await api.call("GET", "/v1/nothing"),
      await api.call("DELETE", "/v1/deliveries"),
    ];
    expect(answers.map((answer) => answer.status)).toEqual([201, 200, 200, 201, 202, 400, 401, 404, 404, 405]);
    for (const answer of answers) expect(answer.headers["cache-control"], String(answer.status)).toBe("no-store");
    // Only /v1: the docs' assets stay cacheable.
    expect((await api.call("GET", "/healthz", { key: null })).headers["cache-control"]).toBeUndefined();
  });
});

describe("routing errors", () => {
  test("answers 404 for unknown routes", async ({ api, database }) => {
    const cases: [string, string][] = [
      ["GET", "/v1/nothing"],
      ["GET", "/v2/deliveries"],
      ["GET", "/favicon.ico"],
      // A trailing slash is another path: the router does not serve it, so neither 405 nor 200.
      ["POST", "/v1/events/"],
      ["GET", "/v1/subscriptions/sub_01JD5V6Y7Z8X9W0V1U2T3S4R5Q/"],
      // Routes that take the method but find nothing by that name; `constructor` and its kind are
      // names every JavaScript object answers to.
      ["GET", "/docs/assets/x"],
      ["GET", "/docs/assets/constructor"],
      ["GET", "/docs/assets/__proto__"],
      ["GET", "/docs/assets/toString"],
      ["GET", "/portal/assets/nope.js"],
    ];
    for (const [method, path] of cases) {
      const response = await api.call(method, path, method === "POST" ? { json: {} } : {});
      expect(response.status, `${method} ${path}`).toBe(404);
      expect(response.body.error).toMatchObject({ type: "invalid_request_error", code: "resource_missing" });
      expectErrorShape(response.body, response.headers);
    }
  });

  test("answers 405 with Allow for a known path and a wrong method", async ({ api, database }) => {
    const cases: [string, string, string][] = [
      ["DELETE", "/v1/deliveries", "GET, HEAD"],
      ["PATCH", "/v1/subscriptions/sub_01JD5V6Y7Z8X9W0V1U2T3S4R5Q", "GET, PUT, DELETE, HEAD"],
      ["GET", "/v1/deliveries/dlv_01JD5V6Y7Z8X9W0V1U2T3S4R5Q/retry", "POST"],
      ["PUT", "/v1/events", "POST"],
    ];
    for (const [method, path, allow] of cases) {
      const response = await api.call(method, path);
      expect(response.status, `${method} ${path}`).toBe(405);
      expect(response.headers.allow?.split(", ").sort()).toEqual(allow.split(", ").sort());
      expect(response.body.error.code).toBe("method_not_allowed");
      expectErrorShape(response.body, response.headers);
    }
  });
});

describe("routing comes before the body", () => {
  test("answers 404 or 405 whatever the body, as it does without one", async ({ api, database }) => {
    const json = { "content-type": "application/json" };
    const cases: [string, string, string, Record<string, string>, number][] = [
      ["POST", "/v1/deliveries", "type=a", { "content-type": "text/plain" }, 405],
      ["PUT", "/v1/events", "{bad", json, 405],
      ["PATCH", "/v1/subscriptions/sub_01JD5V6Y7Z8X9W0V1U2T3S4R5Q", "{}", { ...json, "content-encoding": "gzip" }, 405],
      ["POST", "/v1/nothing", "{bad", json, 404],
      ["POST", "/v1/events/", "{bad", json, 404],
      // Over BODY_LIMIT_BYTES (2048 here), sent whole or announced by Content-Length alone.
      ["POST", "/v1/nothing", JSON.stringify({ blob: "x".repeat(4096) }), json, 404],
      ["PUT", "/v1/events", JSON.stringify({ blob: "x".repeat(4096) }), json, 405],
    ];
    for (const [method, path, body, headers, status] of cases) {
      const response = await api.call(method, path, { body, headers });
      expect(response.status, `${method} ${path} ${body.slice(0, 10)}`).toBe(status);
      expect(response.body.error.code).toBe(status === 404 ? "resource_missing" : "method_not_allowed");
      expectErrorShape(response.body, response.headers);
    }
  });
});

describe("request bodies", () => {
  const big = JSON.stringify({ type: "big.one", data: { blob: "x".repeat(4096) } });

  test("answers 413 over the body limit", async ({ api, database }) => {
    const response = await api.call("POST", "/v1/events", {
      body: big,
      headers: { "content-type": "application/json" },
    });
    expect(response.status).toBe(413);
    expect(response.body.error).toMatchObject({ type: "invalid_request_error", code: "body_too_large" });
  });

  test("answers 413 for a chunked body over the limit", async ({ api, database }) => {
    async function* chunks() {
      for (let i = 0; i < 10; i++) yield Buffer.from(big.slice(i * 500, (i + 1) * 500));
      yield Buffer.from(big.slice(5000));
    }
    const response = await request(`${api.baseUrl}/v1/events`, {
      method: "POST",
      headers: { authorization: `Bearer ${TEST_API_KEY}`, "content-type": "application/json" },
      body: Readable.from(chunks()),
    });
    const body = (await response.body.json()) as { error: { code: string } };
    expect(response.statusCode).toBe(413);
    expect(body.error.code).toBe("body_too_large");
  });

  test("accepts a chunked body under the limit", async ({ api, database }) => {
    async function* chunks() {
      yield Buffer.from('{"type":"chunked.ok",');
      yield Buffer.from('"data":{"a":1}}');
    }
    const response = await request(`${api.baseUrl}/v1/events`, {
      method: "POST",
      headers: { authorization: `Bearer ${TEST_API_KEY}`, "content-type": "application/json" },
      body: Readable.from(chunks()),
    });
    expect(response.statusCode).toBe(202);
    await response.body.dump();
  });

  test("answers 415 for a body that is not JSON and 400 for malformed JSON", async ({ api, database }) => {
    const plain = await api.call("POST", "/v1/events", { body: "type=a", headers: { "content-type": "text/plain" } });
    expect(plain.status).toBe(415);
    expect(plain.body.error.code).toBe("unsupported_media_type");
    const malformed = await api.call("POST", "/v1/subscriptions", {
      body: "{nope",
      headers: { "content-type": "application/json" },
    });
    expect(malformed.status).toBe(400);
    expect(malformed.body.error.code).toBe("invalid_json");
    const vendorJson = await api.call("POST", "/v1/events", {
      body: '{"type":"vendor.json","data":{}}',
      headers: { "content-type": "application/vnd.api+json; charset=utf-8" },
    });
    expect(vendorJson.status).toBe(202);
  });

  test("refuses a malformed Content-Type with a 415 that says what to send", async ({ api, database }) => {
    for (const type of [
      "application/json;;;",
      "application/json; charset",
      "application/json ;charset=utf-8",
      "application/vnd.v2+json",
    ]) {
      const response = await api.call("POST", "/v1/events", {
        body: '{"type":"a.b","data":{}}',
        headers: { "content-type": type },
      });
      expect(response.status, type).toBe(415);
      expect(response.body.error.code).toBe("unsupported_media_type");
      expect(response.body.error.message, type).toMatch(/^The (Content-Type header|request body) .*application\/json/);
      expectErrorShape(response.body, response.headers);
    }
  });

  test("reads bodies as UTF-8 only: another charset or a Content-Encoding is a 415", async ({ api, database }) => {
    const publish = async (headers: Record<string, string>) =>
      api.call("POST", "/v1/events", {
        body: '{"type":"charset.check","data":{}}',
        headers: { "content-type": "application/json", ...headers },
      });
    for (const charset of ["latin1", "ISO-8859-1", '"utf-16"']) {
      const response = await publish({ "content-type": `application/json; charset=${charset}` });
      expect(response.status, charset).toBe(415);
      expect(response.body.error).toMatchObject({
        code: "unsupported_media_type",
        message: expect.stringContaining("must be UTF-8"),
      });
    }
    for (const encoding of ["gzip", "br", "identity, gzip"]) {
      const response = await publish({ "content-encoding": encoding });
      expect(response.status, encoding).toBe(415);
      expect(response.body.error).toMatchObject({
        code: "unsupported_media_type",
        message: expect.stringContaining("Content-Encoding"),
      });
      expect(response.headers["accept-encoding"]).toBe("identity");
      expectErrorShape(response.body, response.headers);
    }
    const accepted: Record<string, string>[] = [
      { "content-type": "application/json; charset=UTF-8" },
      { "content-type": 'application/json;charset="utf-8"' },
      { "content-encoding": "identity" },
    ];
    for (const headers of accepted) {
      expect((await publish(headers)).status, JSON.stringify(headers)).toBe(202);
    }
  });

  test("refuses bytes that are not UTF-8 instead of replacing them, and keeps those that are", async ({
    api,
    database,
  }) => {
    const send = async (body: Buffer | AsyncIterable<Buffer>) => {
      const response = await request(`${api.baseUrl}/v1/events`, {
        method: "POST",
        headers: { authorization: `Bearer ${TEST_API_KEY}`, "content-type": "application/json" },
        body: body instanceof Buffer ? body : Readable.from(body),
      });
      return { status: response.statusCode, body: (await response.body.json()) as Record<string, any> };
    };
    const type = "utf8.check";
    for (const invalid of [[0xff], [0xc3], [0xed, 0xa0, 0x80]]) {
      const response = await send(
        Buffer.concat([Buffer.from(`{"type":"${type}","data":{"s":"`), Buffer.from(invalid), Buffer.from('"}}')]),
      );
      expect(response.status, String(invalid)).toBe(400);
      expect(response.body.error).toMatchObject({
        code: "invalid_json",
        message: "The request body is not valid UTF-8",
      });
    }
    expect(await api.db.event.count({ where: { type } })).toBe(0);
    // A character split between two chunks arrives whole.
    const text = Buffer.from(`{"type":"${type}","data":{"s":"é€😀"}}`);
    const split = text.indexOf(Buffer.from("€")) + 1;
    const accepted = await send(
      (async function* () {
        yield text.subarray(0, split);
        yield text.subarray(split);
      })(),
    );
    expect(accepted.status).toBe(202);
    expect(accepted.body.data).toEqual({ s: "é€😀" });
  });
});

describe("rate limiting", () => {
  test("answers 429 with retry-after past the per-key rate", async ({ api, database }) => {
    const limited = await startTestApi(testConfig(database.url, { RATE_LIMIT_PER_SECOND: "5" }));
    try {
      const statuses: number[] = [];
      let retryAfter: string | undefined;
      for (let i = 0; i < 12; i++) {
        const response = await limited.call("GET", "/v1/subscriptions");
        statuses.push(response.status);
        if (response.status === 429) {
          retryAfter = response.headers["retry-after"];
          expect(response.body.error).toMatchObject({ type: "rate_limit_error", code: "rate_limited" });
        }
      }
      expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(5);
      expect(statuses).toContain(429);
      expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      await limited.get("/v1/subscriptions", 200, { schema: subscriptionListSchema });
      // Health checks are not limited.
      expect((await limited.call("GET", "/healthz", { key: null })).status).toBe(200);
    } finally {
      await limited.close();
    }
  });
});
