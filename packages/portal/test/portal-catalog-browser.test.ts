// The event-type catalog in the portal (docs/portal.md#event-types): what each type means, its
// fields and an example; the picker of an endpoint's events; and the endpoint's payload filter and
// delivery order.
import { waitFor } from "@webhooks/testing";
import type { Page } from "playwright-core";
import { beforeAll, describe, expect, it } from "vitest";
import { accessibilityProblems, portalHarness } from "./browser.ts";
import type { PortalStack } from "./stack.ts";

const harness = portalHarness(() => ({ status: 200, body: "thanks" }));
const { openBrowser, portalLink, expectSelfContained, shot, createEndpoint } = harness;
let stack: PortalStack;

const INVOICE_PAID = {
  name: "invoice.paid",
  description: "An invoice was paid in full.",
  schema: {
    type: "object",
    properties: {
      invoice_id: { type: "string", description: "The invoice, in_…" },
      amount: { type: "integer", minimum: 0, description: "In cents." },
      currency: { type: "string", enum: ["usd", "eur"] },
      paid_at: { type: "string", format: "date-time" },
      customer: {
        type: "object",
        properties: { id: { type: "string" }, email: { type: "string", format: "email" } },
        required: ["id"],
      },
      lines: { type: "array", items: { $ref: "#/$defs/line" } },
    },
    required: ["invoice_id", "amount", "currency"],
    $defs: { line: { type: "object", properties: { sku: { type: "string" } }, required: ["sku"] } },
  },
  examples: [{ invoice_id: "in_123", amount: 4200, currency: "usd", lines: [{ sku: "PRO" }] }],
};

beforeAll(async () => {
  stack = harness.stack;
  for (const type of [
    INVOICE_PAID,
    { name: "customer.created", description: "A customer signed up." },
    { name: "invoice.created", description: "Use invoice.paid instead." },
  ])
    expect((await stack.call("POST", "/v1/event-types", type)).status).toBe(201);
  expect((await stack.call("PUT", "/v1/event-types/invoice.created", { deprecated: true })).status).toBe(200);
  // Archived: no longer offered.
  expect((await stack.call("POST", "/v1/event-types", { name: "invoice.voided" })).status).toBe(201);
  expect((await stack.call("DELETE", "/v1/event-types/invoice.voided")).status).toBe(200);
});

/** The names the picker has ticked (not those that "every event type" ticks with it). */
const ticked = (page: Page) =>
  page
    .locator("fieldset.picker input[type=checkbox]:checked:not(:disabled)")
    .evaluateAll((boxes) => boxes.map((box) => (box as HTMLInputElement).value || "*"));

describe("the event-type catalog", () => {
  it("lists the types with their descriptions, and shows each one's fields, schema and example payload", async () => {
    const session = await openBrowser();
    const { page } = session;
    await page.goto(await portalLink());
    await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Event types" }).click();
    const entries = page.locator("ul.catalog li");
    await expect.poll(() => entries.count()).toBe(3);
    expect(await entries.allTextContents()).toEqual([
      "customer.createdA customer signed up.",
      "invoice.created DeprecatedUse invoice.paid instead.",
      "invoice.paidAn invoice was paid in full.",
    ]);
    await shot(page, "20-catalog");
    const problems = await accessibilityProblems(page, "catalog");

    await page.getByRole("link", { name: "invoice.paid" }).click();
    await page.getByRole("heading", { name: "invoice.paid" }).waitFor();
    expect(await page.title()).toBe("Event type · Webhooks");
    const rows = await page
      .locator("table.fields tbody tr")
      .evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent)));
    expect(rows).toEqual([
      ["amount", "integer", "Yes", "In cents."],
      ["currency", 'one of "usd", "eur"', "Yes", "—"],
      ["customer", "object", "No", "—"],
      ["customer.email", "string (email)", "No", "—"],
      ["customer.id", "string", "Yes, when customer is present", "—"],
      ["invoice_id", "string", "Yes", "The invoice, in_…"],
      ["lines", "array of object", "No", "—"],
      ["lines[].sku", "string", "Yes, when lines is present", "—"],
      ["paid_at", "string (date-time)", "No", "—"],
    ]);
    // The example, as a webhook's body; the schema itself, as the catalog holds it.
    const example = JSON.parse((await page.locator("figure.example pre").textContent()) ?? "");
    expect(example).toMatchObject({ type: "invoice.paid", data: INVOICE_PAID.examples[0] });
    await page.getByText("JSON Schema").click();
    expect(JSON.parse((await page.locator("details pre").textContent()) ?? "")).toEqual(INVOICE_PAID.schema);
    await shot(page, "21-event-type");
    problems.push(...(await accessibilityProblems(page, "event type")));

    await page.goto(`${stack.baseUrl}/portal#/event-types/invoice.created`);
    await page
      .getByRole("status")
      .getByText(/^Deprecated\./)
      .waitFor();
    await page.getByText("No schema is given: the payload can be any JSON object.").waitFor();
    await page.getByText("No example is given.").waitFor();
    await page.goto(`${stack.baseUrl}/portal#/event-types/no.such.type`);
    await page.getByRole("heading", { name: "Event type not found" }).waitFor();
    expect(problems).toEqual([]);
    expectSelfContained(session);
  });

  it("offers its names when a customer picks an endpoint's events, with the service's notices and other names", async () => {
    const session = await openBrowser();
    const { page } = session;
    await page.goto(await portalLink());
    await page.getByRole("link", { name: "Add endpoint" }).click();
    await page.getByLabel("Endpoint URL").fill(`${stack.receiver.url}/picked`);
    await page.getByLabel("Every event type").waitFor();
    expect(await ticked(page)).toEqual(["*"]);
    // Every type includes the catalog's: they show ticked, and cannot be unticked one by one.
    expect(await page.getByLabel("invoice.paid").isDisabled()).toBe(true);
    await page.getByLabel("Every event type").uncheck();
    await page.getByLabel("invoice.paid").check();
    await page.getByText("Notices about your endpoints").click();
    await page.getByLabel("operational.subscription.disabled").check();
    await page.getByText("Other event types").click();
    await page.getByLabel("Names not listed above, separated by commas").fill("legacy.thing");
    expect(await page.getByLabel("invoice.voided").count()).toBe(0);
    await shot(page, "22-picker");
    expect(await accessibilityProblems(page, "picker")).toEqual([]);
    await page.getByRole("button", { name: "Create endpoint" }).click();
    await page.getByRole("link", { name: /go to the endpoint/ }).click();
    const id = page.url().split("/").pop()!;
    const created = (await stack.call("GET", `/v1/subscriptions/${id}`)).body;
    expect(created.events).toEqual(["invoice.paid", "operational.subscription.disabled", "legacy.thing"]);

    // The endpoint's settings show what it has, and change it.
    await page.getByLabel("Every event type").waitFor();
    expect(await ticked(page)).toEqual(["invoice.paid", "operational.subscription.disabled"]);
    expect(await page.getByLabel("Names not listed above, separated by commas").inputValue()).toBe("legacy.thing");
    await page.getByLabel("invoice.paid").uncheck();
    await page.getByLabel("customer.created").check();
    await page.getByLabel("Names not listed above, separated by commas").fill("");
    await page.getByRole("button", { name: "Save settings" }).click();
    await page.getByText("Settings saved.").waitFor();
    expect((await stack.call("GET", `/v1/subscriptions/${id}`)).body.events).toEqual([
      "customer.created",
      "operational.subscription.disabled",
    ]);
    await page.getByLabel("Every event type").check();
    expect(await ticked(page)).toEqual(["*", "operational.subscription.disabled"]);
    await page.getByRole("button", { name: "Save settings" }).click();
    await expect
      .poll(async () => (await stack.call("GET", `/v1/subscriptions/${id}`)).body.events)
      .toEqual(["*", "operational.subscription.disabled"]);
    expectSelfContained(session);
  });

  it("says in plain words, by the picker, that a strict deployment does not send a name", async () => {
    const strict = await stack.startApi({ EVENT_TYPES_STRICT: "true" });
    const session = await openBrowser();
    const { page } = session;
    await page.goto((await portalLink()).replace(stack.baseUrl, strict));
    await page.getByRole("link", { name: "Add endpoint" }).click();
    await page.getByLabel("Endpoint URL").fill(`${stack.receiver.url}/strict`);
    await page.getByLabel("Every event type").uncheck();
    await page.getByText("Other event types").click();
    await page.getByLabel("Names not listed above, separated by commas").fill("legacy.thing, invoice.voided");
    await page.getByRole("button", { name: "Create endpoint" }).click();
    await page
      .locator("#new-events-error")
      .getByText("We do not send these event types: legacy.thing, invoice.voided. Choose from the list.")
      .waitFor();
    await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe("new-events");
    await shot(page, "23-picker-strict");
    expectSelfContained(session, strict);
  });
});

describe("on a phone", () => {
  it("shows an event type's fields and the picker without sideways scrolling", async () => {
    const session = await openBrowser({ width: 390, height: 844 });
    const { page } = session;
    await page.goto(await portalLink());
    await page.getByRole("heading", { name: "Endpoints" }).waitFor();
    await page.goto(`${stack.baseUrl}/portal#/event-types/invoice.paid`);
    await page.locator("table.fields tbody tr").first().waitFor();
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await shot(page, "26-phone-event-type");
    await page.goto(`${stack.baseUrl}/portal#/endpoints/new`);
    await page.getByLabel("Every event type").waitFor();
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await shot(page, "27-phone-picker");
    expectSelfContained(session);
  });
});

describe("an endpoint's payload filter", () => {
  it("is shown in words, edited as JSON with its meaning shown as typed, applied, and refused in plain words", async () => {
    const id = await createEndpoint(`${stack.receiver.url}/filtered`, ["invoice.paid"]);
    const session = await openBrowser();
    const { page } = session;
    await page.goto(await portalLink());
    await page.getByRole("heading", { name: "Endpoints" }).waitFor();
    await page.goto(`${stack.baseUrl}/portal#/endpoints/${id}`);
    const section = page.locator("section", { has: page.getByRole("heading", { name: "Payload filter" }) });
    await section.getByText("No filter: every event of the chosen types is sent.").waitFor();

    const filter = page.getByLabel("Filter (JSON)");
    await filter.fill('{"data": {"amount": {"$gte": 1000}, "currency": {"$in": ["usd", "eur"]}}}');
    // What it means, before it is saved.
    await section.locator(".filter-draft").getByText("Only events where all of these hold:").waitFor();
    expect(await section.locator(".filter-draft li").allTextContents()).toEqual([
      "data.amount is 1000 or more",
      'data.currency is "usd" or "eur"',
    ]);
    await page.getByRole("button", { name: "Save filter" }).click();
    await section.getByRole("status").getByText("Filter saved: it applies to events published from now on.").waitFor();
    expect((await stack.call("GET", `/v1/subscriptions/${id}`)).body.filter).toEqual({
      data: { amount: { $gte: 1000 }, currency: { $in: ["usd", "eur"] } },
    });
    expect(await section.locator(".filter-now li").allTextContents()).toEqual([
      "data.amount is 1000 or more",
      'data.currency is "usd" or "eur"',
    ]);
    await shot(page, "24-filter");

    // It applies: of two events, only the one that matches reaches the endpoint.
    for (const amount of [500, 5000])
      await stack.call("POST", "/v1/events", {
        type: "invoice.paid",
        data: { invoice_id: `in_${amount}`, amount, currency: "usd" },
        tenant_id: "acme",
      });
    await waitFor(() => stack.receiver.received.some((webhook) => webhook.path === "/filtered"), {
      what: "the matching event",
    });
    const deliveries = (await stack.call("GET", `/v1/deliveries?subscription_id=${id}`)).body.data;
    expect(deliveries).toHaveLength(1);

    // Refused by the API: said by the field, in plain words.
    await filter.fill('{"data": {"amount": {"$gte": "lots"}}}');
    await page.getByRole("button", { name: "Save filter" }).click();
    await page
      .locator("#edit-filter-error")
      .getByText("$gte, at data.amount, compares with a number, or with a date and time such as 2026-01-31T12:00:00Z.")
      .waitFor();
    expect(await filter.getAttribute("aria-invalid")).toBe("true");
    await filter.fill('{"data": {"plan": {"$regex": "^pro"}}}');
    await page.getByRole("button", { name: "Save filter" }).click();
    await page
      .locator("#edit-filter-error")
      .getByText(/^\$regex, at data\.plan, is not something a filter can say/)
      .waitFor();
    // Not JSON: said before anything is sent.
    await filter.fill('{"data": {"amount": 1000,}}');
    await page.getByRole("button", { name: "Save filter" }).click();
    await page
      .locator("#edit-filter-error")
      .getByText(/^The filter is not valid JSON/)
      .waitFor();
    await shot(page, "25-filter-problem");
    expect(await accessibilityProblems(page, "endpoint with a filter")).toEqual([]);

    await page.getByRole("button", { name: "Remove filter" }).click();
    await section
      .getByRole("status")
      .getByText(/^Filter removed/)
      .waitFor();
    expect((await stack.call("GET", `/v1/subscriptions/${id}`)).body.filter).toBeNull();
    await section.locator(".filter-now").getByText("No filter: every event of the chosen types is sent.").waitFor();
    expectSelfContained(session);
  });
});

describe("an endpoint's delivery order", () => {
  it("is shown, said what it costs, set to in order and back, and applied", async () => {
    const id = await createEndpoint(`${stack.receiver.url}/ordered`, ["customer.created"]);
    const session = await openBrowser();
    const { page } = session;
    await page.goto(await portalLink());
    await page.getByRole("heading", { name: "Endpoints" }).waitFor();
    await page.goto(`${stack.baseUrl}/portal#/endpoints/${id}`);
    const facts = page.locator("section", { has: page.getByRole("heading", { name: "State" }) });
    const section = page.locator("section", { has: page.getByRole("heading", { name: "Delivery order" }) });
    await section.getByText(/a failing webhook holds back the ones after it/).waitFor();
    await facts.getByText("As soon as possible").waitFor();
    const save = section.getByRole("button", { name: "Save order" });
    expect(await save.isDisabled()).toBe(true);

    await page.getByLabel("Deliver", { exact: true }).selectOption("fifo");
    await save.click();
    await section
      .getByRole("status")
      .getByText("Saved: events published from now on are delivered in order, one at a time.")
      .waitFor();
    await facts.getByText("In order, one at a time").waitFor();
    expect((await stack.call("GET", `/v1/subscriptions/${id}`)).body.ordering).toBe("fifo");
    await shot(page, "28-ordering");
    expect(await accessibilityProblems(page, "endpoint delivered in order")).toEqual([]);

    // It applies: events published one after the other arrive in that order.
    for (const n of [1, 2, 3])
      expect(
        (await stack.call("POST", "/v1/events", { type: "customer.created", data: { n }, tenant_id: "acme" })).status,
      ).toBe(202);
    await waitFor(() => stack.receiver.received.filter((webhook) => webhook.path === "/ordered").length === 3, {
      what: "the three events",
    });
    expect(
      stack.receiver.received.filter((webhook) => webhook.path === "/ordered").map((webhook) => webhook.json.data.n),
    ).toEqual([1, 2, 3]);

    await page.getByLabel("Deliver", { exact: true }).selectOption("none");
    await save.click();
    await section
      .getByRole("status")
      .getByText(/^Saved: deliveries go as soon as possible/)
      .waitFor();
    expect((await stack.call("GET", `/v1/subscriptions/${id}`)).body.ordering).toBe("none");
    expectSelfContained(session);
  });
});
