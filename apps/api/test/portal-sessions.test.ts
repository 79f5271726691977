import type { TestApi } from "@webhooks/api/testing";
import { ConfigError, loadConfig } from "@webhooks/core";
import { createApiKey, revokeApiKey } from "@webhooks/db";
import { testEnv } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { type CreatePortalSessionRequest, portalSessionSchema } from "../src/portal-sessions/schemas.ts";
import { subscriptionListSchema } from "../src/subscriptions/schemas.ts";
import { apiTest } from "./fixtures.ts";

// docs/api.md#portal-sessions: POST /v1/portal_sessions and the tokens it hands out. The API's
// clock (which the authenticator uses) is the test's, so a token expires by moving it, without
// waiting.

let offsetMs = 0;
const clock = () => Date.now() + offsetMs;

const test = apiTest({ env: { PUBLIC_URL: "https://hooks.example.com/webhooks/" }, clock });

async function createSession(api: TestApi, body: CreatePortalSessionRequest) {
  return (await api.post("/v1/portal_sessions", body, 201, { schema: portalSessionSchema })).body;
}

describe("POST /v1/portal_sessions", () => {
  test("returns a token scoped to the tenant and the portal url under PUBLIC_URL, the token in the fragment", async ({
    api,
    database,
  }) => {
    const before = Date.now();
    const session = await createSession(api, { tenant_id: "acme", expires_in: "15m" });
    expect(Object.keys(session).sort()).toEqual(["expires_at", "object", "tenant_id", "token", "url"]);
    expect(session).toMatchObject({ object: "portal_session", tenant_id: "acme" });
    expect(session.token).toMatch(/^whps_[A-Za-z0-9_-]{43}$/);
    // The trailing slash of PUBLIC_URL is trimmed.
    expect(session.url).toBe(`https://hooks.example.com/webhooks/portal#token=${session.token}`);
    const expiresAt = Date.parse(session.expires_at);
    expect(session.expires_at).toBe(new Date(expiresAt).toISOString());
    expect(expiresAt).toBeGreaterThanOrEqual(before + 15 * 60_000 - 5_000);
    expect(expiresAt).toBeLessThanOrEqual(Date.now() + 15 * 60_000 + 5_000);
  });

  test("stores only the token's hash", async ({ api, database }) => {
    const session = await createSession(api, { tenant_id: "acme" });
    const rows = await api.db.portalSession.findMany({ where: { tenantId: "acme" } });
    expect(rows.length).toBeGreaterThan(0);
    expect(JSON.stringify(rows)).not.toContain(session.token);
    expect(JSON.stringify(rows)).not.toContain(session.token.slice(5));
  });

  test("lasts 1h by default, and accepts 1m to 24h", async ({ api, database }) => {
    const byDefault = await createSession(api, { tenant_id: "acme" });
    const hour = Date.parse(byDefault.expires_at) - Date.now();
    expect(hour).toBeGreaterThan(3_600_000 - 10_000);
    expect(hour).toBeLessThanOrEqual(3_600_000 + 5_000);
    for (const expires_in of ["1m", "60s", "90m", "24h", "1d", "86400000ms"])
      await createSession(api, { tenant_id: "acme", expires_in });
  });

  test.for([["0m"], ["59s"], ["24h1m"], ["25h"], ["2d"], ["1x"], ["1 h"], [""], [60], [null]])(
    "refuses expires_in %j with a 400",
    async ([expires_in], { api, database }) => {
      const response = await api.post("/v1/portal_sessions", { tenant_id: "acme", expires_in }, 400);
      expect(response.body.error).toMatchObject({
        type: "invalid_request_error",
        code: "parameter_invalid",
        param: "expires_in",
      });
      expect(response.body.error.message).toContain("expires_in must be a duration from 1m to 24h");
    },
  );

  test("needs tenant_id, and refuses unknown parameters", async ({ api, database }) => {
    const missing = await api.post("/v1/portal_sessions", { expires_in: "1h" }, 400);
    expect(missing.body.error).toMatchObject({ code: "parameter_missing", param: "tenant_id" });
    const unknown = await api.post("/v1/portal_sessions", { tenant_id: "acme", scope: "all" }, 400);
    expect(unknown.body.error).toMatchObject({ code: "parameter_unknown", param: "scope" });
  });

  test("can be created by an unscoped stored key, not by a scoped one", async ({ api, database }) => {
    const { key: unscoped } = await createApiKey({ db: api.db }, { name: "server" });
    const { key: scoped } = await createApiKey({ db: api.db }, { name: "acme", tenantId: "acme" });
    await api.post("/v1/portal_sessions", { tenant_id: "acme" }, 201, { schema: portalSessionSchema, key: unscoped });
    const refused = await api.post("/v1/portal_sessions", { tenant_id: "acme" }, 403, { key: scoped });
    expect(refused.body.error).toMatchObject({ type: "permission_error", code: "permission_denied" });
  });
});

describe("a portal session token", () => {
  test("works on the /v1 API for its tenant until it expires, then is a 401 that says so", async ({
    api,
    database,
  }) => {
    const ours = await api.call("POST", "/v1/subscriptions", {
      json: { url: "https://example.com/a", events: ["x"], tenant_id: "initech" },
    });
    await api.call("POST", "/v1/subscriptions", {
      json: { url: "https://example.com/b", events: ["x"], tenant_id: "umbrella" },
    });
    const session = await createSession(api, { tenant_id: "initech", expires_in: "2m" });
    const listed = await api.get("/v1/subscriptions", 200, { schema: subscriptionListSchema, key: session.token });
    expect(listed.body.data.map((s: { id: string }) => s.id)).toEqual([ours.body.id]);

    // Still valid a moment before expires_at (cached or not), refused from expires_at on.
    const expiresAt = Date.parse(session.expires_at);
    offsetMs = expiresAt - Date.now() - 1_000;
    await api.get("/v1/subscriptions", 200, { schema: subscriptionListSchema, key: session.token });
    offsetMs = expiresAt - Date.now() + 1;
    const expired = await api.get("/v1/subscriptions", 401, { key: session.token });
    expect(expired.body.error).toMatchObject({ type: "authentication_error", code: "portal_session_expired" });
    expect(expired.body.error.message).toBe("The portal session has expired. Ask for a new portal link.");
    // Also when the authenticator has not seen it before (no cache entry).
    const unseen = await createSession(api, { tenant_id: "initech", expires_in: "1m" });
    offsetMs = Date.parse(unseen.expires_at) - Date.now() + 60_000;
    expect((await api.call("GET", `/v1/subscriptions/${ours.body.id}`, { key: unseen.token })).body.error.code).toBe(
      "portal_session_expired",
    );
    offsetMs = 0;
  });

  test("stops working when the key that created it is revoked, like an unknown token", async ({ api, database }) => {
    const { key: doomed, record } = await createApiKey({ db: api.db }, { name: "revoked-later" });
    const { key: kept } = await createApiKey({ db: api.db }, { name: "kept" });
    const ofDoomed = (
      await api.post("/v1/portal_sessions", { tenant_id: "initech" }, 201, { schema: portalSessionSchema, key: doomed })
    ).body;
    const ofKept = (
      await api.post("/v1/portal_sessions", { tenant_id: "initech" }, 201, { schema: portalSessionSchema, key: kept })
    ).body;
    const ofStatic = await createSession(api, { tenant_id: "initech" });
    for (const session of [ofDoomed, ofKept, ofStatic])
      await api.get("/v1/subscriptions", 200, { schema: subscriptionListSchema, key: session.token });

    await revokeApiKey({ db: api.db }, record.id);
    try {
      // The API trusts a session it has just checked for a few seconds (as it does a key): let that time pass.
      offsetMs = 10_000;
      const refused = await api.get("/v1/subscriptions", 401, { key: ofDoomed.token });
      expect(refused.body.error).toMatchObject({ type: "authentication_error", code: "api_key_invalid" });
      // Sessions of other keys, stored or static, are untouched.
      await api.get("/v1/subscriptions", 200, { schema: subscriptionListSchema, key: ofKept.token });
      await api.get("/v1/subscriptions", 200, { schema: subscriptionListSchema, key: ofStatic.token });
    } finally {
      offsetMs = 0;
    }
  });

  test("that was never issued is an invalid credential", async ({ api, database }) => {
    const forged = `whps_${"A".repeat(43)}`;
    const response = await api.get("/v1/subscriptions", 401, { key: forged });
    expect(response.body.error).toMatchObject({ type: "authentication_error", code: "api_key_invalid" });
  });
});

describe("PUBLIC_URL", () => {
  const load = (PUBLIC_URL?: string, PORT = "3000") =>
    loadConfig({
      ...testEnv("postgresql://localhost/x", { PORT }),
      ...(PUBLIC_URL === undefined ? {} : { PUBLIC_URL }),
    });

  test("defaults to http://localhost:<PORT>, and loses its trailing slashes", () => {
    expect(load().publicUrl).toBe("http://localhost:3000");
    expect(load(undefined, "8080").publicUrl).toBe("http://localhost:8080");
    expect(load("https://hooks.example.com/").publicUrl).toBe("https://hooks.example.com");
    expect(load("http://10.0.0.5:3000/webhooks//").publicUrl).toBe("http://10.0.0.5:3000/webhooks");
  });

  test.for([
    "ftp://hooks.example.com",
    "hooks.example.com",
    "https://hooks.example.com/?a=1",
    "https://hooks.example.com/?",
    "https://hooks.example.com/#x",
    "https://user:pw@hooks.example.com",
  ])("refuses %s, naming the variable", (value) => {
    expect(() => load(value)).toThrow(ConfigError);
    expect(() => load(value)).toThrow(
      /PUBLIC_URL must be an http:\/\/ or https:\/\/ URL without query, fragment or credentials/,
    );
  });
});
