import { publish, subscribe, subscribeWithScheme } from "@webhooks/api/testing";
import { newId } from "@webhooks/core";
import { createTestCa, sql } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { attemptListSchema } from "../src/deliveries/schemas.ts";
import { portalSessionSchema } from "../src/portal-sessions/schemas.ts";
import { subscriptionSchema } from "../src/subscriptions/schemas.ts";
import { apiTest } from "./fixtures.ts";

// What each attempt sent (docs/api.md#list-a-deliverys-attempts): the delivery's snapshot of the
// custom headers at the attempt's own start, with signatures and credentials elided.
const test = apiTest();

const STARTED = ["2026-11-23T08:20:23.987Z", "2026-11-23T08:25:24.001Z"];

/** Two attempts of the event's one delivery, as the worker records them. */
async function attempted(databaseUrl: string, eventId: string): Promise<string> {
  const [delivery] = await sql<{ id: string }>(databaseUrl, "SELECT id FROM deliveries WHERE event_id = $1", [eventId]);
  await sql(
    databaseUrl,
    `
    INSERT INTO delivery_attempts (id, delivery_id, subscription_id, number, url, started_at, duration_ms, response_code, error)
    SELECT a.id, d.id, d.subscription_id, a.number, 'https://example.com/hooks', a.started_at::timestamptz, a.duration_ms, a.code, NULL
    FROM deliveries d, (VALUES ($4, 1, $2, 120, 500), ($5, 2, $3, 80, 200)) AS a(id, number, started_at, duration_ms, code)
    WHERE d.id = $1`,
    [delivery!.id, STARTED[0], STARTED[1], newId("attempt"), newId("attempt")],
  );
  return delivery!.id;
}

const seconds = (iso: string) => String(Math.floor(Date.parse(iso) / 1000));

describe("GET /v1/deliveries/{id}/attempts: request_headers", () => {
  test("lists what each attempt sent, in order, with the signature and credential values elided", async ({
    api,
    database,
  }) => {
    const subscription = await subscribe(api, {
      events: ["invoice.paid"],
      tenant_id: "acme",
      headers: { Authorization: "Bearer s3cr3t-t0ken", "X-Region": "eu", "X-Api-Key": "k_live_123" },
    });
    const event = await publish(api, { type: "invoice.paid", data: { n: 1 }, tenant_id: "acme" });
    const deliveryId = await attempted(database.url, event.id);
    // A later update changes the subscription, not what its delivery sent (its snapshot).
    await api.put(`/v1/subscriptions/${subscription.id}`, { headers: { "X-Region": "us" } }, 200, {
      schema: subscriptionSchema,
    });

    const { body } = await api.get(`/v1/deliveries/${deliveryId}/attempts`, 200, { schema: attemptListSchema });
    expect(body.data.map((attempt) => Object.entries(attempt.request_headers))).toEqual(
      [STARTED[1]!, STARTED[0]!].map((started) => [
        ["content-type", "application/json"],
        ["user-agent", "webhook-delivery-service/1.0"],
        // The custom headers in the order PostgreSQL keeps them (jsonb), which the worker sends.
        ["X-Region", "eu"],
        ["X-Api-Key", "…"],
        ["Authorization", "Bearer …"],
        ["webhook-id", event.id],
        ["webhook-timestamp", seconds(started)],
        ["webhook-signature", "v1,…"],
      ]),
    );
    expect(JSON.stringify(body)).not.toMatch(/s3cr3t|k_live_123/);
  });

  test("shows the same to the tenant's portal session, and nothing to another tenant's", async ({ api, database }) => {
    await subscribe(api, { events: ["order.paid"], tenant_id: "globex", headers: { "X-Shop": "42" } });
    const event = await publish(api, { type: "order.paid", data: {}, tenant_id: "globex" });
    const deliveryId = await attempted(database.url, event.id);
    const session = async (tenant: string) =>
      (
        await api.post("/v1/portal_sessions", { tenant_id: tenant, expires_in: "1h" }, 201, {
          schema: portalSessionSchema,
        })
      ).body;
    const own = await session("globex");
    const other = await session("acme");

    const seen = await api.get(`/v1/deliveries/${deliveryId}/attempts`, 200, {
      key: own.token,
      schema: attemptListSchema,
    });
    expect(seen.body.data[0]!.request_headers).toMatchObject({ "X-Shop": "42", "webhook-id": event.id });
    const refused = await api.get(`/v1/deliveries/${deliveryId}/attempts`, 404, { key: other.token });
    expect(refused.body.error.code).toBe("resource_missing");
  });

  test("shows the authorization header the endpoint auth adds, as its scheme alone, and v1a for ed25519", async ({
    api,
    database,
  }) => {
    const subscription = await subscribeWithScheme(api, {
      events: ["auth.shown"],
      signature_scheme: "ed25519",
      headers: { "X-Region": "eu" },
      auth: { type: "basic", username: "acme", password: "pw-NEVER-SHOWN-1" },
    });
    const basicEvent = await publish(api, { type: "auth.shown", data: { n: 1 } });
    const basicDelivery = await attempted(database.url, basicEvent.id);
    // The auth changes: the delivery made before keeps the auth it was created with (its snapshot).
    await api.put(
      `/v1/subscriptions/${subscription.id}`,
      {
        auth: {
          type: "oauth2_client_credentials",
          token_url: "https://auth.example.com/oauth/token",
          client_id: "acme",
          client_secret: "cs-NEVER-SHOWN-2",
        },
      },
      200,
      { schema: subscriptionSchema },
    );
    const oauthEvent = await publish(api, { type: "auth.shown", data: { n: 2 } });
    const oauthDelivery = await attempted(database.url, oauthEvent.id);
    await api.put(`/v1/subscriptions/${subscription.id}`, { auth: null }, 200, { schema: subscriptionSchema });
    const noneEvent = await publish(api, { type: "auth.shown", data: { n: 3 } });
    const noneDelivery = await attempted(database.url, noneEvent.id);

    const shown = async (deliveryId: string) => {
      const { body } = await api.get(`/v1/deliveries/${deliveryId}/attempts`, 200, { schema: attemptListSchema });
      expect(JSON.stringify(body)).not.toMatch(/NEVER-SHOWN|acme:|YWNtZT/);
      return body.data.map((attempt) => Object.entries(attempt.request_headers));
    };
    const sent = (eventId: string, authorization?: string) =>
      [STARTED[1]!, STARTED[0]!].map((started) => [
        ["content-type", "application/json"],
        ["user-agent", "webhook-delivery-service/1.0"],
        ["X-Region", "eu"],
        ["webhook-id", eventId],
        ["webhook-timestamp", seconds(started)],
        ["webhook-signature", "v1a,…"],
        // Last, as the worker adds it.
        ...(authorization ? [["authorization", authorization]] : []),
      ]);
    expect(await shown(basicDelivery)).toEqual(sent(basicEvent.id, "Basic …"));
    expect(await shown(oauthDelivery)).toEqual(sent(oauthEvent.id, "Bearer …"));
    expect(await shown(noneDelivery)).toEqual(sent(noneEvent.id));
  });

  test("a client certificate alone adds no header; hmac-sha256 stays v1", async ({ api, database }) => {
    const ca = await createTestCa();
    const client = await ca.issueClient("acme-webhooks");
    await subscribe(api, {
      events: ["certificate.shown"],
      client_certificate: { certificate: client.certificate, private_key: client.privateKey },
    });
    const event = await publish(api, { type: "certificate.shown", data: {} });
    const deliveryId = await attempted(database.url, event.id);
    const { body } = await api.get(`/v1/deliveries/${deliveryId}/attempts`, 200, { schema: attemptListSchema });
    expect(Object.keys(body.data[0]!.request_headers)).toEqual([
      "content-type",
      "user-agent",
      "webhook-id",
      "webhook-timestamp",
      "webhook-signature",
    ]);
    expect(body.data[0]!.request_headers["webhook-signature"]).toBe("v1,…");
    expect(JSON.stringify(body)).not.toContain("PRIVATE KEY");
  });
});
