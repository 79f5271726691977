// How the portal speaks to a customer: problems in plain words by the field they are about, times
// in the viewer's own zone, and the deployment's name, logo and way back (docs/portal.md).
import { waitFor } from "@webhooks/testing";
import { beforeAll, describe, expect, it } from "vitest";
import { PORTAL_CSP } from "../src/index.ts";
import { ApiError } from "../src/page/api.ts";
import { explain } from "../src/page/problems.ts";
import { portalHarness, TENANT } from "./browser.ts";
import type { PortalStack } from "./stack.ts";

const harness = portalHarness(() => ({ status: 200, body: "thanks" }));
const { openBrowser, portalLink, expectSelfContained, shot, createEndpoint, publish } = harness;
let stack: PortalStack;
beforeAll(() => {
  stack = harness.stack;
});

/** The API's answer to a bad request, explained as the portal explains it. */
async function explained(method: string, path: string, body: Record<string, unknown> | undefined, baseUrl?: string) {
  const response = await fetch(`${baseUrl ?? stack.baseUrl}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${await sessionToken()}`,
      ...(body ? { "content-type": "application/json" } : {}),
    },
    body: body ? JSON.stringify(body) : undefined,
  });
  const { error } = (await response.json()) as { error: { message: string; param?: string; code?: string } };
  expect(response.status, error.message).toBe(400);
  return explain(new ApiError(response.status, error.message, error.param, undefined, error.code), body);
}

let token: string | undefined;
/** A portal session's token: the portal's own credential, so the API answers as it answers the page. */
async function sessionToken(): Promise<string> {
  token ??= (await stack.call("POST", "/v1/portal_sessions", { tenant_id: TENANT, expires_in: "1h" })).body.token;
  return token!;
}

const endpoint = (fields: Record<string, unknown>) => ({ url: "https://example.com/hooks", events: ["*"], ...fields });
const header = (name: string, value = "x") => ({ headers: { [name]: value } });

describe("problems in the customer's words", () => {
  // Every refusal a portal form can meet, asked of the real API: if its wording changes, the
  // portal's words for it fail here rather than fall back to the API's.
  it.each([
    [
      endpoint({ url: "ftp://example.com/hooks" }),
      "url",
      /^Enter the full address of your endpoint, starting with https:\/\//,
    ],
    [endpoint({ url: "example.com/hooks" }), "url", /^Enter the full address of your endpoint/],
    [endpoint({ url: undefined }), "url", /^Enter the address of your endpoint\.$/],
    [endpoint({ url: "https://user:pw@example.com/" }), "url", /^Take the user name and password out of the address/],
    [endpoint({ url: "https://example.com\\@evil.test/" }), "url", /^The address must not contain a backslash/],
    [endpoint({ url: "https://example.com:0/" }), "url", /^Port 0 cannot be used/],
    [endpoint({ url: `https://${"a".repeat(64)}.com/` }), "url", /^The server name in this address is too long/],
    [endpoint({ url: `https://example.com/${"a".repeat(2040)}` }), "url", /^The address is too long: 2,048 characters/],
    [endpoint({ events: [] }), "events", /^Choose at least one event type, or \* for every type\.$/],
    [
      endpoint({ events: ["invoice.paid", "invoice/paid"] }),
      "events",
      /^"invoice\/paid" is not a valid event type name: names have letters, digits and _ - \. : only/,
    ],
    [endpoint({ events: ["a".repeat(256)] }), "events", /^"a+" is too long: an event type name has 255 characters/],
    [
      endpoint({ events: Array.from({ length: 257 }, (_, i) => `e${i}`) }),
      "events",
      /^An endpoint can list at most 256/,
    ],
    [endpoint(header("Host")), "headers", /^We set the Host header ourselves, so it cannot be added here\./],
    [endpoint(header("Webhook-Id")), "headers", /^We set the Webhook-Id header ourselves/],
    [endpoint(header("X Customer")), "headers", /^"X Customer" is not a valid header name/],
    [
      endpoint(header("X-Customer", "café")),
      "headers",
      /^The value of X-Customer can hold plain ASCII characters only/,
    ],
    [endpoint({ headers: { "X-A": "1", "x-a": "2" } }), "headers", /^x-a is given twice/],
    [
      endpoint({ headers: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`X-H${i}`, "1"])) }),
      "headers",
      /^You can add 20 extra headers at most\.$/,
    ],
    [endpoint(header("X-Big", "v".repeat(4100))), "headers", /^The extra headers are too long: 4,096 characters/],
    [endpoint({ description: "d".repeat(1025) }), "description", /^The description is too long: 1,024 characters/],
    [endpoint({ filter: [] }), "filter", /^The filter must be a JSON object, in braces \{ \}\.$/],
    [
      endpoint({ filter: { data: { plan: { $regex: "^pro" } } } }),
      "filter",
      /^\$regex, at data\.plan, is not something a filter can say\. It can use \$eq, \$neq/,
    ],
    [
      endpoint({ filter: { data: { amount: { $gt: "lots" } } } }),
      "filter",
      /^\$gt, at data\.amount, compares with a number, or with a date and time/,
    ],
    [
      endpoint({ filter: { data: { plan: { $in: "pro" } } } }),
      "filter",
      /^\$in, at data\.plan, needs a list of values/,
    ],
    [endpoint({ filter: { data: { $or: { plan: "pro" } } } }), "filter", /^\$or, at data, needs a list of filters/],
    [
      endpoint({ filter: { data: { refund: { $exists: "yes" } } } }),
      "filter",
      /^\$exists, at data\.refund, takes true or false\.$/,
    ],
    [
      endpoint({ filter: { data: { id: { $startsWith: 1 } } } }),
      "filter",
      /^\$startsWith, at data\.id, takes text in quotes/,
    ],
    [endpoint({ filter: { $gte: 1 } }), "filter", /^\$gte cannot come first: a filter starts with "data"/],
    [
      endpoint({ filter: { amount: 1 } }),
      "filter",
      /^A filter starts with "data" \(the event's payload\) or "type" \(its event type\), not "amount"/,
    ],
    [endpoint({ filter: { data: { plan: {} } } }), "filter", /^At data\.plan, the filter has an empty condition \{\}/],
    [
      endpoint({ filter: { data: { a: { b: { c: { d: { e: { f: { g: { h: { i: { j: 1 } } } } } } } } } } } }),
      "filter",
      /^The filter goes more than 10 levels deep, at data\.a\.b\.c\.d\.e\.f\.g\.h\.i\. Make it simpler\.$/,
    ],
    [endpoint({ filter: { data: { note: "x".repeat(4100) } } }), "filter", /^The filter is too long: 4,096 characters/],
  ])("POST /v1/subscriptions %j: by %s", async (body, field, message) => {
    const problem = await explained("POST", "/v1/subscriptions", body);
    expect(problem.field).toBe(field);
    expect(problem.message).toMatch(message);
  });

  it("words the delivery log's filter, the recovery window and the overlap", async () => {
    const response = await explained("GET", "/v1/deliveries?response_code=abc", undefined);
    expect(response).toEqual({
      field: "response_code",
      message: "Enter a status code, such as 500, or a group of codes: 2xx, 3xx, 4xx or 5xx.",
    });
    const id = await createEndpoint("https://example.com/words", ["*"]);
    expect(
      await explained("POST", `/v1/subscriptions/${id}/recover`, {
        since: "2026-01-02T00:00:00Z",
        until: "2026-01-01T00:00:00Z",
      }),
    ).toEqual({ field: "until", message: "The end must be later than the start." });
    expect(await explained("POST", `/v1/subscriptions/${id}/rotate_secret`, { overlap: "8d" })).toEqual({
      field: "overlap",
      message: "Choose how long the old secret stays valid.",
    });
  });

  it("shows an erased payload as such, and why its delivery cannot be sent again", async () => {
    const endpointId = await createEndpoint(`${stack.receiver.url}/erased`, ["erased.event"]);
    const published = await stack.call("POST", "/v1/events", {
      type: "erased.event",
      data: { card: "4242" },
      tenant_id: TENANT,
    });
    expect(published.status).toBe(202);
    const listed = await waitFor(async () => {
      const page = await stack.call("GET", `/v1/deliveries?subscription_id=${endpointId}&status=delivered`);
      return page.body.data[0];
    });
    const erased = await stack.call("DELETE", `/v1/events/${published.body.id}/payload`);
    expect(erased.status).toBe(200);

    const session = await openBrowser();
    const { page } = session;
    await page.goto(await portalLink());
    await page.goto(`${stack.baseUrl}/portal#/deliveries/${listed.id}`);
    const payload = page.getByRole("region", { name: "Payload" });
    await payload.getByText(/^Erased on .*: the payload is no longer kept/).waitFor();
    expect(await payload.locator("pre").count()).toBe(0);
    expect(await page.getByText("4242").count()).toBe(0);
    await page.getByRole("button", { name: "Resend" }).click();
    await page.getByText("This delivery cannot be sent again: the event's payload was erased").waitFor();
    await shot(page, "erased-payload");
    expectSelfContained(session);
  });

  it("words what a production deployment refuses: plain http, private addresses", async () => {
    const production = await stack.startApi({ ALLOW_HTTP_URLS: "false", ALLOW_PRIVATE_DESTINATIONS: "false" });
    expect(await explained("POST", "/v1/subscriptions", endpoint({ url: "http://example.com/" }), production)).toEqual({
      field: "url",
      message:
        "Use an address that starts with https://. Webhooks are not sent over plain http://, which anyone on the way could read.",
    });
    for (const url of ["https://10.1.2.3/hooks", "https://localhost/hooks", "https://[::1]/hooks"]) {
      const problem = await explained("POST", "/v1/subscriptions", endpoint({ url }), production);
      expect(problem.message).toMatch(/^This address is on a private network/);
    }
  });

  it("puts each problem under its field, marks the field and moves the focus there; never the API's wording", async () => {
    const session = await openBrowser();
    const { page } = session;
    await page.goto(await portalLink());
    await page.getByRole("link", { name: "Add endpoint" }).click();
    const url = page.getByLabel("Endpoint URL");
    const events = page.getByLabel("Event types");
    const headers = page.getByLabel("Extra HTTP headers (optional)");
    const create = page.getByRole("button", { name: "Create endpoint" });

    await url.fill("ftp://example.com/hooks");
    await create.click();
    const urlError = page.locator("#new-url-error");
    await urlError.getByText(/^Enter the full address of your endpoint, starting with https:\/\//).waitFor();
    expect(await url.getAttribute("aria-invalid")).toBe("true");
    expect(await url.getAttribute("aria-describedby")).toBe("new-url-error");
    await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe("new-url");
    await shot(page, "10-problem-url");

    await url.fill(`${stack.receiver.url}/words`);
    await events.fill("invoice.paid, invoice/paid");
    await create.click();
    await page
      .locator("#new-events-error")
      .getByText(/^"invoice\/paid" is not a valid event type name/)
      .waitFor();
    expect(await urlError.count()).toBe(0);
    expect(await url.getAttribute("aria-invalid")).toBeNull();
    expect(await events.getAttribute("aria-describedby")).toBe("new-events-help new-events-error");
    await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe("new-events");

    await events.fill("invoice.paid");
    await headers.fill("X-Customer: acme\nHost: example.com");
    await create.click();
    await page.locator("#new-headers-error").getByText("We set the Host header ourselves").waitFor();
    await headers.fill("X-Customer acme");
    await create.click();
    await page
      .locator("#new-headers-error")
      .getByText("Line 1 must be a header's name, a colon and its value, such as X-Customer: 42.")
      .waitFor();
    await shot(page, "11-problem-headers");
    // Typing elsewhere leaves the focus where the customer put it.
    await page.getByLabel("Description (optional)").fill("Billing");
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("new-description");
    expect(await page.locator("main").textContent()).not.toMatch(/url must|events\[|headers\.|must contain only/);

    // A form on an endpoint's page: the recovery window.
    await headers.fill("");
    await create.click();
    await page.getByRole("link", { name: /go to the endpoint/ }).click();
    await page.getByLabel("From").fill("2026-01-02T10:00");
    await page.getByLabel("Until (optional; now if empty)").fill("2026-01-01T10:00");
    await page.getByRole("button", { name: "Resend failed deliveries" }).click();
    await page.locator("#recover-until-error").getByText("The end must be later than the start.").waitFor();
    await shot(page, "12-problem-recover");
    expectSelfContained(session);
  });
});

describe("times", () => {
  it.each([
    ["America/New_York", "en-US"],
    ["Australia/Adelaide", "en-GB"],
  ])("are shown in the viewer's zone (%s), named, with UTC in the markup and the tooltip", async (zone, locale) => {
    await createEndpoint(`${stack.receiver.url}/times`, ["time.told"]);
    await publish("time.told", {});
    const session = await openBrowser(undefined, { timezoneId: zone, locale });
    const { page } = session;
    await page.goto(await portalLink());
    await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Delivery log" }).click();
    const time = page.locator("table tbody tr").first().locator("time");
    await time.waitFor();
    const iso = (await time.getAttribute("datetime"))!;
    expect(iso).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(await time.getAttribute("title")).toBe(`${iso} (UTC)`);
    // The text is the instant in the viewer's zone, with the zone's name in it.
    const expected = new Intl.DateTimeFormat(locale, {
      timeZone: zone,
      year: "numeric",
      month: "short",
      day: "numeric",
      hour: "numeric",
      minute: "2-digit",
      second: "2-digit",
      timeZoneName: "short",
    }).format(new Date(iso));
    expect(await time.textContent()).toBe(expected);
    expect(expected).toMatch(/GMT[+-]|E[SD]T|AC[SD]T/);
    const offset = new Intl.DateTimeFormat("en", { timeZone: zone, timeZoneName: "shortOffset" })
      .formatToParts(new Date())
      .find((part) => part.type === "timeZoneName")!.value;
    await page.getByRole("contentinfo").getByText(`Times are in your time zone, ${zone} (${offset}).`).waitFor();
    await shot(page, `13-times-${zone.replace("/", "-")}`, false);
    expectSelfContained(session);
  });
});

/** A small logo, as a deployment would set it (PORTAL_LOGO_URL). */
const LOGO =
  "data:image/svg+xml;base64," +
  Buffer.from(
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#6d28d9"/><path d="M9 23 16 8l7 15h-4l-3-7-3 7z" fill="#fff"/></svg>',
  ).toString("base64");

describe("branding", () => {
  it("names the page after the deployment's product, shows its logo and leads back to it, loading nothing from elsewhere", async () => {
    // A name that must be escaped, not read as markup.
    const name = `Acme & "Co" <Cloud>`;
    const back = `${stack.receiver.url}/settings/webhooks`;
    const branded = await stack.startApi({ PORTAL_NAME: name, PORTAL_LOGO_URL: LOGO, PORTAL_RETURN_URL: back });
    const response = await fetch(`${branded}/portal`);
    expect(response.headers.get("content-security-policy")).toBe(PORTAL_CSP);
    const html = await response.text();
    expect(html).toContain("<title>Acme &#38; &#34;Co&#34; &#60;Cloud&#62;</title>");
    expect(html).not.toMatch(/<script(?![^>]*\ssrc=)[^>]*>|\sstyle=|\son[a-z]+=/);

    const session = await openBrowser();
    const { page } = session;
    await page.goto((await portalLink()).replace(stack.baseUrl, branded));
    await page.getByRole("heading", { name: "Endpoints" }).waitFor();
    expect(await page.title()).toBe(`Endpoints · ${name}`);
    const banner = page.getByRole("banner");
    await banner.getByText(name, { exact: true }).waitFor();
    const logo = banner.locator("img.logo");
    expect(await logo.getAttribute("src")).toBe(LOGO);
    // Drawn (the CSP let it in), and as tall as the header's text.
    await expect.poll(() => logo.evaluate((image: HTMLImageElement) => image.naturalWidth)).toBeGreaterThan(0);
    expect(await logo.evaluate((image) => image.getBoundingClientRect().height)).toBe(28);
    const backLink = banner.getByRole("link", { name: `← Back to ${name}` });
    expect(await backLink.getAttribute("href")).toBe(back);
    await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Delivery log" }).click();
    await expect.poll(() => page.title()).toBe(`Delivery log · ${name}`);
    await page.locator("table tbody tr").first().waitFor();
    await shot(page, "14-branded", false);
    expectSelfContained(session, branded);

    // Without a name, the way back is named by its host.
    const unnamed = await stack.startApi({ PORTAL_RETURN_URL: back });
    const bare = await openBrowser();
    await bare.page.goto((await portalLink()).replace(stack.baseUrl, unnamed));
    await bare.page.getByRole("link", { name: `← Back to ${new URL(back).host}` }).waitFor();
    await bare.page.getByRole("banner").getByText("Webhooks", { exact: true }).waitFor();
    expect(await bare.page.locator("img.logo").count()).toBe(0);
    expectSelfContained(bare, unnamed);
  });

  it("refuses to start with a logo from another origin, in one line that says what it takes", async () => {
    const refused = stack.startApi({ PORTAL_LOGO_URL: "https://cdn.example.com/logo.svg" });
    await expect(refused).rejects.toThrow(
      /^api exited \(1\) before it was ready:\nInvalid configuration: PORTAL_LOGO_URL must be a path on this server, such as \/brand\/logo\.svg, or a data:image\/\.\.\. URL: the portal loads nothing from another origin\n?$/,
    );
  });
});
