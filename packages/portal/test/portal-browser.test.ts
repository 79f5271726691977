import { mkdir } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { TEST_API_KEY, waitFor } from "@webhooks/testing";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startPortalStack, type PortalStack } from "./stack.ts";

// Debian's chromium, driven by playwright-core (no browser download); CHROMIUM_PATH points
// elsewhere on machines that keep it elsewhere.
const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
/** Screenshots the tests take, kept by CI as artifacts (git-ignored). */
const SCREENSHOTS = fileURLToPath(new URL("../../../artifacts/portal/", import.meta.url));
const LINK_INVALID = /This link has expired or is not valid; ask for a new one/;

let stack: PortalStack;
let browser: Browser;
/** What the receiver answers at /flaky: 500 until a test says otherwise. */
let flakyStatus = 500;

beforeAll(async () => {
  stack = await startPortalStack((webhook) => {
    if (webhook.path === "/flaky" && flakyStatus !== 200) return { status: flakyStatus, body: "receiver is down for maintenance" };
    return { status: 200, body: "thanks" };
  });
  browser = await chromium.launch({
    executablePath: CHROMIUM_PATH,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"],
  });
  await mkdir(SCREENSHOTS, { recursive: true });
});
afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

interface Session {
  context: BrowserContext;
  page: Page;
  /** Every URL the page asked for: documents, scripts, styles, fetches, sockets. */
  requested: string[];
  /** Console errors and uncaught exceptions: a CSP violation shows up here. */
  problems: string[];
}

const sessions: Session[] = [];
afterEach(async () => {
  for (const session of sessions.splice(0)) await session.context.close();
});

async function openBrowser(viewport = { width: 1280, height: 900 }): Promise<Session> {
  const context = await browser.newContext({ viewport });
  context.setDefaultTimeout(15_000);
  const page = await context.newPage();
  const session: Session = { context, page, requested: [], problems: [] };
  context.on("request", (request) => session.requested.push(request.url()));
  page.on("websocket", (socket) => session.requested.push(socket.url()));
  page.on("console", (message) => message.type() === "error" && session.problems.push(message.text()));
  page.on("pageerror", (error) => session.problems.push(error.message));
  sessions.push(session);
  return session;
}

/** The link a team's product hands its customer. */
async function portalLink(): Promise<string> {
  return `${stack.baseUrl}/portal#token=${TEST_API_KEY}`;
}

/** Nothing was loaded from, or sent to, another origin; and the page raised no error. */
function expectSelfContained(session: Session) {
  const network = session.requested.filter((url) => /^(https?|wss?):/.test(url));
  expect(network.length).toBeGreaterThan(2);
  expect(network.filter((url) => new URL(url).origin !== stack.baseUrl)).toEqual([]);
  expect(session.problems).toEqual([]);
}

const shot = (page: Page, name: string) => page.screenshot({ path: `${SCREENSHOTS}${name}.png`, fullPage: true });

describe("the customer portal in a browser", () => {
  it("creates an endpoint, shows its secret once, sends a test event and follows it, pauses, resumes, edits and rotates", async () => {
    const session = await openBrowser();
    const { page } = session;
    const response = await page.goto(await portalLink());
    expect(response?.headers()["content-security-policy"]).toContain("default-src 'none'");

    // The token leaves the address bar at once; the tab keeps it.
    await page.getByRole("heading", { name: "Endpoints" }).waitFor();
    expect(page.url()).not.toContain("token");
    await page.getByText("No endpoints yet").waitFor();

    await page.getByRole("link", { name: "Add endpoint" }).click();
    await page.getByLabel("Endpoint URL").fill(`${stack.receiver.url}/hooks`);
    await page.getByLabel("Event types").fill("invoice.paid, invoice.payment_failed");
    await page.getByLabel("Description (optional)").fill("Billing");
    await page.getByLabel("Extra HTTP headers (optional)").fill("X-Customer: acme");
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
    await shot(page, "02-test-delivery");

    // Pause and resume.
    await page.getByRole("main").getByRole("link", { name: `${stack.receiver.url}/hooks` }).click();
    await page.getByRole("button", { name: "Pause" }).click();
    await page.getByRole("status").getByText(/^Paused/).waitFor();
    const id = page.url().split("/").pop()!;
    expect((await stack.call("GET", `/v1/subscriptions/${id}`)).body.active).toBe(false);
    await page.getByRole("button", { name: "Resume" }).click();
    await page.getByRole("status").getByText(/^Resumed/).waitFor();
    expect((await stack.call("GET", `/v1/subscriptions/${id}`)).body.active).toBe(true);

    // Edit the event types and headers.
    await page.getByLabel("Event types").fill("invoice.paid");
    await page.getByLabel("Extra HTTP headers").fill("X-Customer: acme\nX-Region: eu");
    await page.getByRole("button", { name: "Save settings" }).click();
    await page.getByText("Settings saved.").waitFor();
    const edited = (await stack.call("GET", `/v1/subscriptions/${id}`)).body;
    expect(edited.events).toEqual(["invoice.paid"]);
    expect(edited.headers).toEqual({ "X-Customer": "acme", "X-Region": "eu" });

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
    await waitFor(() => stack.receiver.received.filter((webhook) => webhook.json.type === "webhook.test").length === 2, { what: "the second test event" });
    expect(stack.receiver.received.filter((webhook) => webhook.json.type === "webhook.test")[1]!.signatureValid).toBe(true);

    expectSelfContained(session);
  });
});
