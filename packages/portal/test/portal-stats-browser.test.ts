// An endpoint's activity on its page (docs/portal.md#stats): the chart of its deliveries over time
// and the counts behind it, on a log written straight into the tables as a busy day would leave it.
import { sql } from "@webhooks/testing";
import { beforeAll, describe, expect, it } from "vitest";
import { accessibilityProblems, portalHarness } from "./browser.ts";
import type { PortalStack } from "./stack.ts";

const harness = portalHarness(() => ({ status: 200, body: "thanks" }));
const { openBrowser, portalLink, expectSelfContained, shot, createEndpoint } = harness;
let stack: PortalStack;
beforeAll(() => {
  stack = harness.stack;
});

/**
 * Hour h of the last 24 (h hours and 10 minutes ago): h % 5 + 1 deliveries delivered and h % 3
 * failed, each with one attempt (200 in 40 + h ms, or 503 in 100 ms); then two timeouts and a
 * network error; and three days ago, 4 more delivered. Returns the totals of the last 24 hours.
 */
async function seedDay(subscriptionId: string) {
  await sql(
    stack.database.url,
    `WITH event AS (INSERT INTO events (id, type, data) VALUES ('evt_01JD5V6Y7Z8X9W0V1U2T3S4R5Q', 'order.paid', '{}') RETURNING id),
     sub AS (SELECT id, url, secret_id, tenant_id FROM subscriptions WHERE id = $1),
     planned AS (
       SELECT h, n, n < h % 5 + 1 AS ok, now() - h * interval '1 hour' - interval '10 minutes' AS at
       FROM generate_series(0, 23) AS h, LATERAL generate_series(0, h % 5 + h % 3) AS n
       UNION ALL SELECT 72, n, true, now() - interval '3 days' FROM generate_series(1, 4) AS n
     ),
     made AS (
       INSERT INTO deliveries (id, subscription_id, event_id, event_type, url, secret_id, tenant_id, status, attempts, response_code, created_at, updated_at)
       SELECT 'dlv_01JD5V6Y7Z8X9W0V1U2T' || lpad(h::text, 2, '0') || lpad(n::text, 3, '0'), sub.id, event.id, 'order.paid', sub.url, sub.secret_id,
              sub.tenant_id, CASE WHEN ok THEN 'delivered' ELSE 'failed' END::delivery_status, 1, CASE WHEN ok THEN 200 ELSE 503 END, at, at
       FROM planned, sub, event RETURNING id, subscription_id, url, created_at, response_code
     )
     INSERT INTO delivery_attempts (id, delivery_id, subscription_id, number, url, started_at, duration_ms, response_code)
     SELECT 'att_' || substr(id, 5), id, subscription_id, 1, url, created_at,
            CASE WHEN response_code = 200 THEN 40 + extract(hour FROM now() - created_at)::int ELSE 100 END, response_code FROM made`,
    [subscriptionId],
  );
  await sql(
    stack.database.url,
    `INSERT INTO delivery_attempts (id, delivery_id, subscription_id, number, url, started_at, duration_ms, timed_out, error)
     VALUES ('att_T1', 'dlv_x', $1, 2, 'u', now() - interval '2 hours', 30000, true, 'timeout after 30000 ms'),
            ('att_T2', 'dlv_x', $1, 3, 'u', now() - interval '2 hours', 30000, true, 'timeout after 30000 ms'),
            ('att_N1', 'dlv_x', $1, 4, 'u', now() - interval '1 hour', 3, false, 'connection refused')`,
    [subscriptionId],
  );
  const hours = Array.from({ length: 24 }, (_, h) => h);
  return {
    delivered: hours.reduce((sum, h) => sum + (h % 5) + 1, 0),
    failed: hours.reduce((sum, h) => sum + (h % 3), 0),
  };
}

describe("an endpoint's activity in the portal", () => {
  it("charts the last 24 hours by hour and the last 7 days by day, with the counts by class and the response times", async () => {
    const id = await createEndpoint("https://shop.example.com/hooks", ["order.paid"]);
    const day = await seedDay(id);
    const session = await openBrowser();
    const { page } = session;
    await page.goto(await portalLink());
    await page.getByRole("link", { name: "https://shop.example.com/hooks" }).click();
    const activity = page.getByRole("region", { name: "Activity" });
    const chart = activity.getByRole("img");
    await chart.waitFor();
    expect(await chart.getAttribute("aria-label")).toBe(
      `Deliveries per hour: ${day.delivered} delivered, ${day.failed} failed, at most 7 in one hour.`,
    );
    // The window touches 24 or 25 UTC hours, each a bar, empty ones included.
    expect(await activity.locator("rect.bar.delivered").count()).toBeGreaterThanOrEqual(24);
    const stat = async (group: string, label: string) => {
      const term = activity.locator(`dl[data-group="${group}"] dt`, { hasText: new RegExp(`^${label}$`) });
      return (await term.locator("xpath=following-sibling::dd[1]").textContent())?.trim();
    };
    expect(await stat("Deliveries", "Delivered")).toBe(String(day.delivered));
    expect(await stat("Deliveries", "Failed")).toBe(String(day.failed));
    expect(await stat("Attempts", "Total")).toBe(String(day.delivered + day.failed + 3));
    expect(await stat("Attempts", "2xx")).toBe(String(day.delivered));
    expect(await stat("Attempts", "5xx")).toBe(String(day.failed));
    expect(await stat("Attempts", "Timeouts")).toBe("2");
    expect(await stat("Attempts", "Network errors")).toBe("1");
    expect(await stat("Response time", "99th percentile")).toBe("100 ms");
    await activity.screenshot({ path: `${process.cwd()}/artifacts/portal/10-endpoint-activity.png` });
    await shot(page, "10-endpoint-page-with-activity");

    await activity.getByRole("button", { name: "Last 7 days" }).click();
    await activity.getByRole("img", { name: /^Deliveries per day \(UTC\)/ }).waitFor();
    expect(await activity.getByRole("button", { name: "Last 7 days" }).getAttribute("aria-pressed")).toBe("true");
    // Seven days touch eight UTC days; the older four deliveries now count.
    expect(await activity.locator("rect.bar.delivered").count()).toBe(8);
    expect(await stat("Deliveries", "Delivered")).toBe(String(day.delivered + 4));
    await activity.screenshot({ path: `${process.cwd()}/artifacts/portal/11-endpoint-activity-7-days.png` });
    expect(await accessibilityProblems(page, "endpoint with activity")).toEqual([]);
    expectSelfContained(session);
  });
});
