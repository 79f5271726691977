import { createSubscription, recordEndpointResults } from "@webhooks/db";
import { sql } from "@webhooks/testing";
import { describe, expect, it } from "vitest";
import { fileDatabase, subscriptionContext } from "./file-database.ts";

// docs/api.md#operational-events: operational events are the operator's. They are published without
// a tenant, so they reach only untenanted subscriptions that name them, even when the subscription
// they are about belongs to a tenant (whose id their data then carries).

const file = fileDatabase();

const rules = {
  maxRetryAfterMs: 3_600_000,
  circuitFailureThreshold: 5,
  circuitProbeIntervalMs: 30_000,
  autoDisableAfterMs: 86_400_000,
};

describe("operational events and tenants", () => {
  it("reach only untenanted subscriptions that name them; data.tenant_id names the tenant", async () => {
    const ctx = subscriptionContext(file.database);
    const create = async (events: string[], tenantId?: string) =>
      (await createSubscription(ctx, { url: "https://example.com/hook", events, tenantId })).subscription.id;
    const failing = await create(["invoice.paid"], "acme");
    const untenantedFailing = await create(["invoice.paid"]);
    const operator = await create(["operational.subscription.disabled"]);
    const tenantWatcher = await create(["operational.subscription.disabled"], "acme");
    const otherTenantWatcher = await create(["operational.subscription.disabled"], "globex");

    // A 410 disables each at once, which publishes operational.subscription.disabled.
    const finishedAt = new Date();
    await recordEndpointResults(
      { sql: file.database.sql },
      [
        { subscriptionId: failing, result: { responseCode: 410, error: null }, finishedAt },
        { subscriptionId: untenantedFailing, result: { responseCode: 410, error: null }, finishedAt },
      ],
      rules,
    );

    const rows = await sql<{
      subscription_id: string;
      tenant_id: string | null;
      event_tenant: string | null;
      data: Record<string, unknown>;
    }>(
      file.url,
      `SELECT d.subscription_id, d.tenant_id, e.tenant_id AS event_tenant, e.data FROM deliveries d JOIN events e ON e.id = d.event_id
       WHERE e.type = 'operational.subscription.disabled' ORDER BY e.data->>'subscription_id'`,
    );
    expect(rows.map((r) => r.subscription_id)).toEqual([operator, operator]);
    expect(rows.every((r) => r.tenant_id === null && r.event_tenant === null)).toBe(true);
    const about = new Map(rows.map((r) => [r.data.subscription_id, r.data]));
    expect(about.get(failing)).toEqual({
      subscription_id: failing,
      tenant_id: "acme",
      reason: "gone",
      response_code: 410,
      error: null,
    });
    // An untenanted subscription's event has no tenant_id, as before tenants existed.
    expect(about.get(untenantedFailing)).toEqual({
      subscription_id: untenantedFailing,
      reason: "gone",
      response_code: 410,
      error: null,
    });
    expect(rows.some((r) => r.subscription_id === tenantWatcher || r.subscription_id === otherTenantWatcher)).toBe(
      false,
    );
  });
});
