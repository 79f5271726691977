import { sql, waitFor } from "@webhooks/testing";
import { beforeAll, describe, expect, it } from "vitest";
import { PORTAL_CSP } from "../src/index.ts";
import { accessibilityProblems, headersShown, portalHarness, TENANT } from "./browser.ts";
import type { PortalStack } from "./stack.ts";

const LINK_INVALID = /This link has expired or is not valid; ask for a new one/;

/** What the receiver answers at /flaky: 500 until a test says otherwise. */
let flakyStatus = 500;

const harness = portalHarness((webhook) => {
  if (webhook.path === "/flaky" && flakyStatus !== 200)
    return { status: flakyStatus, body: "receiver is down for maintenance" };
  if (webhook.path === "/gone") return { status: 410, body: "this endpoint was retired" };
  return { status: 200, body: "thanks" };
});
const { openBrowser, portalLink, expectSelfContained, shot, createEndpoint, publish } = harness;
let stack: PortalStack;
beforeAll(() => {
  stack = harness.stack;
});

describe("the customer portal in a browser", () => {
  it("serves the page with a strict CSP and no inline code, and its assets under hashed names, cached for good", async () => {
    const page = await fetch(`${stack.baseUrl}/portal`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(page.headers.get("content-security-policy")).toBe(PORTAL_CSP);
    expect(page.headers.get("x-frame-options")).toBe("DENY");
    const html = await page.text();
    expect(html).not.toMatch(/<script(?![^>]*\ssrc=)[^>]*>|\sstyle=|\son[a-z]+=/);
    const assets = [...html.matchAll(/(?:src|href)="(\/portal\/assets\/[^"]+)"/g)].map((match) => match[1]!);
    expect(assets.map((path) => path.replace(/-[A-Z0-9]+\./, "-HASH."))).toEqual([
      "/portal/assets/portal-HASH.css",
      "/portal/assets/portal-HASH.js",
    ]);
    for (const path of assets) {
      const asset = await fetch(`${stack.baseUrl}${path}`);
      expect(asset.status).toBe(200);
      expect(asset.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
      expect((await asset.arrayBuffer()).byteLength).toBeGreaterThan(1000);
    }
    const missing = await fetch(`${stack.baseUrl}/portal/assets/portal-NOPE.js`);
    expect(missing.status).toBe(404);
    expect((await missing.json()).error.message).toBe("No such portal asset: portal-NOPE.js");
    expect((await fetch(`${stack.baseUrl}/portal`, { method: "POST" })).status).toBe(405);
  });

  it("creates an endpoint, shows its secret once, sends a test event and follows it, pauses, resumes, edits and rotates", async () => {
    const session = await openBrowser();
    const { page } = session;
    const response = await page.goto(await portalLink());
    expect(response?.headers()["content-security-policy"]).toContain("default-src 'none'");

    // The token leaves the address bar at once; the tab keeps it.
    await page.getByRole("heading", { name: "Endpoints" }).waitFor();
    expect(page.url()).not.toContain("token");
    await page.getByText("No endpoints yet").waitFor();
    // A reload keeps working: the tab kept the token.
    await page.reload();
    await page.getByText("No endpoints yet").waitFor();

    await page.getByRole("link", { name: "Add endpoint" }).click();
    await page.getByLabel("Endpoint URL").fill(`${stack.receiver.url}/hooks`);
    await page.getByLabel("Event types").fill("invoice.paid, invoice.payment_failed");
    await page.getByLabel("Description (optional)").fill("Billing");
    await page
      .getByLabel("Extra HTTP headers (optional)")
      .fill("X-Customer: acme\nAuthorization: Bearer cust-t0ken-42");
    await page.getByRole("button", { name: "Create endpoint" }).click();

    const secretBox = page.getByRole("textbox", { name: "Signing secret" });
    const secret = await secretBox.inputValue();
    expect(secret).toMatch(/^whsec_/);
    await expect.poll(() => page.getByText("it will not be shown again").count()).toBe(1);
    await shot(page, "01-endpoint-created");
    stack.receiver.secrets.splice(0, stack.receiver.secrets.length, secret);

    await page.getByRole("link", { name: /go to the endpoint/ }).click();
    await page.getByRole("heading", { name: `${stack.receiver.url}/hooks` }).waitFor();
    // Shown once: nowhere on the endpoint's page.
    expect(await page.content()).not.toContain(secret);

    // A test event reaches the receiver, signed; the page follows its delivery to the first attempt.
    await page.getByRole("button", { name: "Send test event" }).click();
    await page.getByRole("link", { name: "Follow its delivery" }).click();
    await page.getByRole("heading", { name: "Delivery of webhook.test" }).waitFor();
    await page.getByRole("article", { name: "Attempt 1" }).getByText("HTTP 200").waitFor();
    await page.getByText("Delivered", { exact: true }).waitFor();
    await page.getByRole("article", { name: "Attempt 1" }).getByText("thanks").waitFor();
    const received = stack.receiver.received.filter((webhook) => webhook.json.type === "webhook.test");
    expect(received).toHaveLength(1);
    expect(received[0]!.signatureValid).toBe(true);
    expect(received[0]!.headers["x-customer"]).toBe("acme");
    // What was sent: the body as the endpoint got it, and the headers, the secrets elided.
    expect(JSON.parse((await page.locator("pre.payload").textContent()) ?? "")).toEqual(received[0]!.json);
    const attempt = page.getByRole("article", { name: "Attempt 1" });
    expect(await headersShown(attempt)).toEqual([
      ["content-type", "application/json"],
      ["user-agent", received[0]!.headers["user-agent"]],
      ["X-Customer", "acme"],
      ["Authorization", "Bearer …"],
      ["webhook-id", received[0]!.headers["webhook-id"]],
      ["webhook-timestamp", received[0]!.headers["webhook-timestamp"]],
      ["webhook-signature", "v1,…"],
    ]);
    expect(received[0]!.headers.authorization).toBe("Bearer cust-t0ken-42");
    expect(await page.content()).not.toContain("cust-t0ken-42");
    expect(await page.content()).not.toContain(String(received[0]!.headers["webhook-signature"]).slice(3));
    await shot(page, "02-test-delivery");

    // Pause and resume.
    await page
      .getByRole("main")
      .getByRole("link", { name: `${stack.receiver.url}/hooks` })
      .click();
    await page.getByRole("button", { name: "Pause" }).click();
    await page
      .getByRole("status")
      .getByText(/^Paused/)
      .waitFor();
    const id = page.url().split("/").pop()!;
    expect((await stack.call("GET", `/v1/subscriptions/${id}`)).body.active).toBe(false);
    await page.getByRole("button", { name: "Resume" }).click();
    await page
      .getByRole("status")
      .getByText(/^Resumed/)
      .waitFor();
    expect((await stack.call("GET", `/v1/subscriptions/${id}`)).body.active).toBe(true);

    // Edit the URL, the event types and the headers.
    await page.getByLabel("Endpoint URL").fill(`${stack.receiver.url}/hooks-v2`);
    await page.getByLabel("Event types").fill("invoice.paid");
    await page.getByLabel("Extra HTTP headers").fill("X-Customer: acme\nX-Region: eu");
    await page.getByRole("button", { name: "Save settings" }).click();
    await page.getByText("Settings saved.").waitFor();
    await page.getByRole("heading", { name: `${stack.receiver.url}/hooks-v2` }).waitFor();
    const edited = (await stack.call("GET", `/v1/subscriptions/${id}`)).body;
    expect(edited.url).toBe(`${stack.receiver.url}/hooks-v2`);
    expect(edited.events).toEqual(["invoice.paid"]);
    expect(edited.headers).toEqual({ "X-Customer": "acme", "X-Region": "eu" });
    expect(edited.tenant_id).toBe(TENANT);

    // Rotate with no overlap: the next webhook verifies with the new secret alone.
    await page.getByLabel("Keep the old secret valid for").selectOption("0s");
    await page.getByRole("button", { name: "Rotate secret" }).click();
    const rotated = await page.getByRole("textbox", { name: "Signing secret" }).inputValue();
    expect(rotated).toMatch(/^whsec_/);
    expect(rotated).not.toBe(secret);
    await shot(page, "03-endpoint-rotated");
    stack.receiver.secrets.splice(0, stack.receiver.secrets.length, rotated);
    await page.getByRole("button", { name: "Send test event" }).click();
    await page.getByRole("link", { name: "Follow its delivery" }).waitFor();
    await waitFor(
      () => stack.receiver.received.filter((webhook) => webhook.json.type === "webhook.test").length === 2,
      { what: "the second test event" },
    );
    const second = stack.receiver.received.filter((webhook) => webhook.json.type === "webhook.test")[1]!;
    expect(second.signatureValid).toBe(true);
    expect(second.path).toBe("/hooks-v2");
    expect(second.headers["x-region"]).toBe("eu");

    // Delete, after a confirmation: gone from the list and from the API; its log stays.
    await page.getByRole("button", { name: "Delete endpoint" }).click();
    await page.getByRole("button", { name: "Yes, delete it" }).click();
    await page.getByRole("heading", { name: "Endpoints" }).waitFor();
    await page.getByText("No endpoints yet").waitFor();
    expect((await stack.call("GET", `/v1/subscriptions/${id}`)).status).toBe(404);
    expect((await stack.call("GET", `/v1/deliveries?subscription_id=${id}`)).body.data).toHaveLength(2);

    expectSelfContained(session);
  });

  it("filters and pages the delivery log, shows a failed delivery's attempts, resends it and recovers an endpoint", async () => {
    const orders = await createEndpoint(`${stack.receiver.url}/orders`, ["order.created"]);
    const flaky = await createEndpoint(`${stack.receiver.url}/flaky`, ["order.failed"]);
    flakyStatus = 500;
    for (let i = 0; i < 22; i += 1) await publish("order.created", { n: i });
    await publish("order.failed", { n: 0 });
    await waitFor(async () => (await finishedDeliveries(orders)) === 22 && (await finishedDeliveries(flaky)) === 1, {
      what: "the seeded deliveries to finish",
    });

    const session = await openBrowser();
    const { page } = session;
    await page.goto(await portalLink());
    await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Delivery log" }).click();
    await page.getByRole("heading", { name: "Delivery log" }).waitFor();
    await page.locator("table tbody tr").getByText("order.failed").waitFor();
    // The portal's picture in docs/portal.md (docs/portal.png is a copy): the log with a failure on
    // top.
    await shot(page, "00-readme", false);

    // One event type: 22 deliveries, 20 on the first page, 2 on the next, and back.
    await page.getByLabel("Event type").fill("order.created");
    await page.getByRole("button", { name: "Apply filters" }).click();
    const rows = page.locator("table tbody tr");
    await expect.poll(() => rows.filter({ hasText: "order.created" }).count()).toBe(20);
    await expect.poll(() => rows.count()).toBe(20);
    const newest = await rows.first().textContent();
    await shot(page, "04-delivery-log");
    await page.getByRole("button", { name: "Older →" }).click();
    await expect.poll(() => rows.count()).toBe(2);
    expect(await page.getByRole("button", { name: "Older →" }).isDisabled()).toBe(true);
    await page.getByRole("button", { name: "← Newer" }).click();
    await expect.poll(() => rows.first().textContent()).toBe(newest);
    await expect.poll(() => rows.count()).toBe(20);
    expect(await page.getByRole("button", { name: "← Newer" }).isDisabled()).toBe(true);
    // The pages are in the address: Back returns to the older page.
    await page.goBack();
    await expect.poll(() => rows.count()).toBe(2);
    await page.goForward();
    await expect.poll(() => rows.count()).toBe(20);

    // The failing endpoint's failed deliveries, by endpoint, status and response class.
    await page.getByLabel("Event type").fill("");
    await page.getByLabel("Endpoint").selectOption({ label: `${stack.receiver.url}/flaky` });
    await page.getByLabel("Status").selectOption("failed");
    await page.getByLabel("Response code").fill("5xx");
    await page.getByRole("button", { name: "Apply filters" }).click();
    await expect.poll(() => rows.count()).toBe(1);
    await rows.first().getByText("Failed", { exact: true }).waitFor();
    await rows.first().getByText("500").waitFor();

    // A value the API refuses: said in plain words by the field, and no list of other filters.
    await page.getByLabel("Response code").fill("abc");
    await page.getByRole("button", { name: "Apply filters" }).click();
    await page
      .getByRole("alert")
      .getByText("Enter a status code, such as 500, or a group of codes: 2xx, 3xx, 4xx or 5xx.")
      .waitFor();
    await expect.poll(() => rows.count()).toBe(0);
    expect(await page.getByLabel("Response code").getAttribute("aria-invalid")).toBe("true");
    await page.getByLabel("Response code").fill("500");
    await page.getByRole("button", { name: "Apply filters" }).click();
    await expect.poll(() => page.getByRole("alert").count()).toBe(0);
    await expect.poll(() => rows.count()).toBe(1);

    // Its attempts, with what the endpoint answered; then a resend once the endpoint is back.
    await rows
      .first()
      .getByRole("link", { name: /order\.failed/ })
      .click();
    await page.getByRole("article", { name: "Attempt 2" }).getByText("HTTP 500").waitFor();
    await page.getByRole("article", { name: "Attempt 1" }).getByText("receiver is down for maintenance").waitFor();
    await shot(page, "05-failed-delivery");
    flakyStatus = 200;
    await page.getByRole("button", { name: "Resend" }).click();
    await page.getByRole("article", { name: "Attempt 3" }).getByText("HTTP 200").waitFor();
    await page.getByText("Delivered", { exact: true }).waitFor();

    // Recover: every failed delivery of a window, sent again.
    flakyStatus = 500;
    await publish("order.failed", { n: 1 });
    // Failed for good (its one retry made), so nothing but the recovery sends it again.
    await waitFor(
      async () =>
        (await deliveriesOf(flaky, "failed")).filter((delivery) => delivery.next_retry_at === null).length === 1,
      {
        what: "the second delivery to fail for good",
      },
    );
    flakyStatus = 200;
    await page.goto(`${stack.baseUrl}/portal#/endpoints/${flaky}`);
    await page.getByRole("button", { name: "Resend failed deliveries" }).click();
    await page.getByRole("status").getByText("1 failed delivery was queued again.").waitFor();
    await waitFor(async () => (await deliveriesOf(flaky, "delivered")).length === 2, {
      what: "the recovered delivery",
    });

    expectSelfContained(session);
  });

  it("works with the keyboard alone, and axe finds no accessibility problem on any view", async () => {
    const session = await openBrowser();
    const { page } = session;
    await page.goto(await portalLink());
    await page.getByRole("heading", { name: "Endpoints" }).waitFor();

    // Tab to "Add endpoint", fill the form, submit with Enter: no mouse.
    const addEndpoint = page.getByRole("link", { name: "Add endpoint" });
    for (
      let presses = 0;
      presses < 10 && !(await addEndpoint.evaluate((link) => link === document.activeElement));
      presses += 1
    )
      await page.keyboard.press("Tab");
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "Add an endpoint" }).waitFor();
    // A new view puts the focus on its heading, as a new page would; the form comes next.
    await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe("view-title");
    await page.keyboard.press("Tab");
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("new-url");
    await page.keyboard.type(`${stack.receiver.url}/keyboard`);
    await page.keyboard.press("Enter");
    await page.getByRole("textbox", { name: "Signing secret" }).waitFor();

    const problems: string[] = [];
    const check = async (view: string) => problems.push(...(await accessibilityProblems(page, view)));
    await check("new endpoint's secret");
    await page.getByRole("link", { name: /go to the endpoint/ }).click();
    await page.getByRole("button", { name: "Send test event" }).waitFor();
    await check("endpoint");
    // Something for the log and a delivery's page to show.
    await page.getByRole("button", { name: "Send test event" }).click();
    await page.getByRole("link", { name: "Follow its delivery" }).waitFor();
    await page.goto(`${stack.baseUrl}/portal#/endpoints`);
    await page.locator("table tbody tr").first().waitFor();
    await check("endpoints");
    await page.goto(`${stack.baseUrl}/portal#/endpoints/new`);
    await page.getByLabel("Endpoint URL").waitFor();
    await check("new endpoint");
    await page.goto(`${stack.baseUrl}/portal#/deliveries`);
    await page.locator("table tbody tr").first().waitFor();
    await check("delivery log");
    await page.locator("table tbody tr").first().getByRole("link").first().click();
    await page.getByRole("heading", { name: "Attempts" }).waitFor();
    await check("delivery");
    expect(problems).toEqual([]);
    expectSelfContained(session);
  });

  it("says why the service disabled an endpoint, shows its health, and Resume turns it back on", async () => {
    const gone = await createEndpoint(`${stack.receiver.url}/gone`, ["shipment.sent"]);
    await publish("shipment.sent", {});
    await waitFor(async () => (await stack.call("GET", `/v1/subscriptions/${gone}`)).body.disabled_reason === "gone", {
      what: "the 410 to disable the endpoint",
    });

    const session = await openBrowser();
    const { page } = session;
    await page.goto(await portalLink());
    await page
      .getByRole("row", { name: /\/gone/ })
      .getByText("Disabled")
      .waitFor();
    await page.getByRole("link", { name: `${stack.receiver.url}/gone` }).click();
    await page.getByText(/because it answered 410 Gone/).waitFor();
    await page.getByRole("definition").getByText("Failing", { exact: true }).waitFor();
    await shot(page, "09-endpoint-disabled");
    await page.getByRole("button", { name: "Resume" }).click();
    await page
      .getByRole("status")
      .getByText(/^Resumed/)
      .waitFor();
    expect(await page.getByText(/because it answered 410 Gone/).count()).toBe(0);
    const resumed = (await stack.call("GET", `/v1/subscriptions/${gone}`)).body;
    expect(resumed).toMatchObject({ active: true, disabled_reason: null });
    expectSelfContained(session);
  });

  it("reads well on a phone", async () => {
    await createEndpoint(`${stack.receiver.url}/phone`, ["phone.rang"]);
    await publish("phone.rang", {});
    const session = await openBrowser({ width: 390, height: 844 });
    const { page } = session;
    await page.goto(await portalLink());
    await page.getByRole("heading", { name: "Endpoints" }).waitFor();
    await page.locator("table tbody tr").first().waitFor();
    await shot(page, "06-phone-endpoints");
    await page.getByRole("link", { name: "Delivery log" }).click();
    await page.locator("table tbody tr").first().waitFor();
    // Nothing wider than the screen: no sideways scrolling.
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await shot(page, "07-phone-delivery-log");
    expectSelfContained(session);
  });

  it("says clearly that a link is not valid, whatever is wrong with it", async () => {
    const expired = await portalLink();
    await sql(stack.database.url, "UPDATE portal_sessions SET expires_at = now() - interval '1 second'");
    for (const [name, url] of [
      ["expired", expired],
      ["invalid", `${stack.baseUrl}/portal#token=not-a-token-we-ever-issued`],
      ["missing", `${stack.baseUrl}/portal`],
    ] as const) {
      const session = await openBrowser();
      await session.page.goto(url);
      await session.page.getByRole("heading", { name: LINK_INVALID }).waitFor();
      expect(session.page.url()).not.toContain("token");
      await shot(session.page, `08-link-${name}`);
      expectSelfContained(session);
    }
  });

  it("shows another tenant's session none of this tenant's endpoints or deliveries, not even by id", async () => {
    const endpoint = await createEndpoint(`${stack.receiver.url}/orders`, ["order.created"]);
    await publish("order.created", { n: "foreign" });
    const delivery = await waitFor(async () => (await deliveriesOf(endpoint, "delivered"))[0], {
      what: "acme's delivery",
    });
    const session = await openBrowser();
    const { page } = session;
    await page.goto(await portalLink("globex"));
    await page.getByText("No endpoints yet").waitFor();
    await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Delivery log" }).click();
    await page.getByText("No deliveries match.").waitFor();
    await page.goto(`${stack.baseUrl}/portal#/endpoints/${endpoint}`);
    await page.getByRole("heading", { name: "Endpoint not found" }).waitFor();
    await page.goto(`${stack.baseUrl}/portal#/deliveries/${delivery.id}`);
    await page.getByRole("heading", { name: "Delivery not found" }).waitFor();
    expectSelfContained(session);
  });
});

async function deliveriesOf(
  subscriptionId: string,
  status: string,
): Promise<{ id: string; next_retry_at: string | null }[]> {
  return (await stack.call("GET", `/v1/deliveries?subscription_id=${subscriptionId}&status=${status}&limit=100`)).body
    .data;
}

/** Deliveries that will not change by themselves: delivered, or failed with no retry planned. */
async function finishedDeliveries(subscriptionId: string): Promise<number> {
  const failed = await deliveriesOf(subscriptionId, "failed");
  return (
    (await deliveriesOf(subscriptionId, "delivered")).length +
    failed.filter((delivery) => delivery.next_retry_at === null).length
  );
}
