import { startTestApi } from "@webhooks/api/testing";
import { testConfig } from "@webhooks/testing";
import { request } from "undici";
import { describe, expect } from "vitest";
import { deliveryListSchema } from "../src/deliveries/schemas.ts";
import { apiTest } from "./fixtures.ts";

const test = apiTest({ env: { ADMIN_USERNAME: "admin", ADMIN_PASSWORD: "s3cret", BODY_LIMIT_BYTES: "2048" } });

function expectErrorShape(body: { error: Record<string, unknown> }, headers: Record<string, string>) {
  expect(body.error).toMatchObject({ type: expect.any(String), code: expect.any(String), message: expect.any(String) });
  expect(body.error.request_id).toMatch(/^req_/);
  expect(body.error.request_id).toBe(headers["request-id"]);
}

/** What an operator uses: request ids, readiness, the OpenAPI document, metrics, Bull Board. */
describe("operations", () => {
  test("puts a request-id on every response", async ({ api, database }) => {
    const ids = new Set<string>();
    for (const path of ["/healthz", "/v1/deliveries", "/nothing"]) {
      const response = await api.call("GET", path);
      expect(response.headers["request-id"]).toMatch(/^req_[0-9A-Z]{26}$/);
      ids.add(response.headers["request-id"]!);
    }
    expect(ids.size).toBe(3);
  });

  test("reports readiness of PostgreSQL and Redis", async ({ api, database }) => {
    const response = await api.call("GET", "/readyz", { key: null });
    expect(response.body).toEqual({ status: "ready", checks: { postgres: { ok: true }, redis: { ok: true } } });
    expect((await api.call("GET", "/healthz", { key: null })).body).toEqual({ status: "ok" });
  });

  test("serves an OpenAPI 3.1 document generated from the routes, and docs that use it", async ({ api, database }) => {
    const response = await api.call("GET", "/openapi.json", { key: null });
    expect(response.body.openapi).toBe("3.1.0");
    expect(response.body.info.license).toEqual({
      name: "Apache-2.0",
      url: "https://www.apache.org/licenses/LICENSE-2.0",
    });
    expect(Object.keys(response.body.paths).sort()).toEqual(
      [
        "/v1/deliveries",
        "/v1/deliveries/{delivery_id}",
        "/v1/deliveries/{delivery_id}/attempts",
        "/v1/deliveries/{delivery_id}/retry",
        "/v1/event-types",
        "/v1/event-types/{name}",
        "/v1/events",
        "/v1/events/{event_id}",
        "/v1/events/{event_id}/payload",
        "/v1/portal_sessions",
        "/v1/subscriptions",
        "/v1/subscriptions/{subscription_id}",
        "/v1/subscriptions/{subscription_id}/recover",
        "/v1/subscriptions/{subscription_id}/rotate_secret",
        "/v1/subscriptions/{subscription_id}/stats",
        "/v1/subscriptions/{subscription_id}/test",
      ].sort(),
    );
    const listParams = response.body.paths["/v1/deliveries"].get.parameters.map((p: { name: string }) => p.name).sort();
    expect(listParams).toEqual([
      "ending_before",
      "event",
      "limit",
      "response_code",
      "since",
      "starting_after",
      "status",
      "subscription_id",
      "tenant_id",
      "until",
    ]);
    expect(response.body.components.securitySchemes.apiKey).toMatchObject({ type: "http", scheme: "bearer" });
    expect(
      Object.keys(
        response.body.paths["/v1/subscriptions/{subscription_id}"].put.requestBody.content["application/json"].schema,
      ),
    ).toBeDefined();

    const docs = await api.call("GET", "/docs", { key: null });
    expect(docs.headers["content-security-policy"]).toBe(
      "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'",
    );
    expect(docs.headers["x-frame-options"]).toBe("DENY");
    // No inline script (the policy would refuse it): Swagger UI starts from an asset.
    expect(docs.body).not.toMatch(/<script>/);
    const init = await api.call("GET", "/docs/assets/docs-init.js", { key: null });
    expect(init.headers["content-type"]).toBe("text/javascript; charset=utf-8");
    expect(init.body).toContain('url: "/openapi.json"');
    expect(init.body).toContain("persistAuthorization: false");
    const bundle = await request(`${api.baseUrl}/docs/assets/swagger-ui-bundle.js`);
    expect(bundle.statusCode).toBe(200);
    expect((await bundle.body.text()).length).toBeGreaterThan(100_000);
  });

  test("exposes Prometheus metrics", async ({ api, database }) => {
    await api.get("/v1/deliveries", 200, { schema: deliveryListSchema });
    const response = await api.call("GET", "/metrics", { key: null });
    expect(response.headers["content-type"]).toContain("text/plain");
    expect(response.body).toMatch(
      /webhook_api_request_duration_seconds_count\{method="GET",route="\/v1\/deliveries",status="200"\} \d+/,
    );
    expect(response.body).toMatch(/webhook_queue_jobs\{state="waiting"\} \d+/);
    expect(response.body).toMatch(/^webhook_queue_dispatching_deliveries \d+$/m);
  });

  test("guards Bull Board with basic auth", async ({ api, database }) => {
    const anonymous = await api.get("/admin/queues", 401, { key: null });
    expect(anonymous.headers["www-authenticate"]).toContain("Basic");
    const wrong = await api.call("GET", "/admin/queues", {
      key: null,
      headers: { authorization: `Basic ${Buffer.from("admin:nope").toString("base64")}` },
    });
    expect(wrong.status).toBe(401);
    const right = await api.call("GET", "/admin/queues", {
      key: null,
      headers: { authorization: `Basic ${Buffer.from("admin:s3cret").toString("base64")}` },
    });
    expect(right.status).toBe(200);
    expect(String(right.body)).toContain("<html");
    const queues = await api.call("GET", "/admin/queues/api/queues", {
      key: null,
      headers: { authorization: `Basic ${Buffer.from("admin:s3cret").toString("base64")}` },
    });
    expect(queues.status).toBe(200);
    expect(JSON.stringify(queues.body)).toContain("deliveries");
  });

  test("refuses writes to Bull Board that a browser sends from another site (CSRF), in the error shape", async ({
    api,
    database,
  }) => {
    const admin = { authorization: `Basic ${Buffer.from("admin:s3cret").toString("base64")}` };
    const queue = api.queue.queues[0]!;
    // Other tests of this file leave their own jobs in the queue: count only these (Bull Board
    // adds jobs of any name, outside the typed job catalog).
    const injected = async () =>
      (await queue.getJobs(["waiting"])).filter((job) => (job.name as string) === "injected");
    const add = (headers: Record<string, string>) =>
      // What a cross-site form with enctype="text/plain" posts: a body that parses as JSON.
      api.call("POST", "/admin/queues/api/queues/deliveries/add", {
        key: null,
        headers: { ...admin, "content-type": "text/plain", ...headers },
        body: '{"name":"injected","data":{"a":"=b"}}',
      });
    const host = new URL(api.baseUrl).host;
    const crossSite: Record<string, string>[] = [
      { "sec-fetch-site": "cross-site" },
      { "sec-fetch-site": "same-site" },
      // Sec-Fetch-Site wins over an Origin that looks right.
      { "sec-fetch-site": "cross-site", origin: `http://${host}` },
      // Browsers without Sec-Fetch-Site: the Origin's host must be the one the request went to.
      { origin: "https://evil.example" },
      { origin: `http://${host}.evil.example` },
      { origin: "null" },
    ];
    for (const headers of crossSite) {
      const refused = await add(headers);
      expect(refused.status, JSON.stringify(headers)).toBe(403);
      expect(refused.body.error).toMatchObject({ type: "permission_error", code: "cross_site_request" });
      expectErrorShape(refused.body, refused.headers);
    }
    // Also without the password: refused before basic auth.
    expect(
      (
        await api.call("PUT", "/admin/queues/api/queues/deliveries/pause", {
          key: null,
          headers: { "sec-fetch-site": "cross-site" },
        })
      ).status,
    ).toBe(403);
    expect(await injected()).toHaveLength(0);

    // The dashboard's own requests, and clients that are not browsers (curl), still work.
    const sameOrigin: Record<string, string>[] = [
      { "sec-fetch-site": "same-origin", origin: `http://${host}` },
      { origin: `http://${host}` },
      {},
    ];
    for (const headers of sameOrigin) {
      expect((await add(headers)).status, JSON.stringify(headers)).toBe(200);
    }
    const added = await injected();
    expect(added).toHaveLength(3);
    await Promise.all(added.map((job) => job.remove()));

    // Reading needs no such check: a link from elsewhere opens the dashboard.
    const opened = await api.call("GET", "/admin/queues", {
      key: null,
      headers: { ...admin, "sec-fetch-site": "cross-site" },
    });
    expect(opened.status).toBe(200);
  });

  test("does not let Bull Board be framed", async ({ api, database }) => {
    const admin = { authorization: `Basic ${Buffer.from("admin:s3cret").toString("base64")}` };
    const answers = [
      await api.call("GET", "/admin/queues", { key: null, headers: admin }),
      await api.call("GET", "/admin/queues/api/queues", { key: null, headers: admin }),
      await api.call("GET", "/admin/queues", { key: null }),
    ];
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 401]);
    for (const answer of answers) {
      expect(answer.headers["x-frame-options"]).toBe("DENY");
      expect(answer.headers["content-security-policy"]).toBe("frame-ancestors 'none'");
    }
  });

  test("has no Bull Board without admin credentials", async ({ api, database }) => {
    const plain = await startTestApi(testConfig(database.url));
    try {
      await plain.get("/admin/queues", 404, { key: null });
    } finally {
      await plain.close();
    }
  });
});
