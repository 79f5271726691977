import { startTestApi, type TestApi } from "@webhooks/api/testing";
import { createTestDatabase, TEST_API_KEY, type TestDatabase, testConfig } from "@webhooks/testing";
import { type Browser, chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// A real browser, because only a browser shows what a page makes it fetch: fonts, scripts and
// styles named in the HTML, in stylesheets or by the scripts themselves. Debian's chromium;
// CHROMIUM_PATH points elsewhere on machines that keep it elsewhere.
const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

let database: TestDatabase;
let api: TestApi;
let browser: Browser;

beforeAll(async () => {
  database = await createTestDatabase();
  api = await startTestApi(testConfig(database.url, { ADMIN_USERNAME: "admin", ADMIN_PASSWORD: "s3cret" }));
  browser = await chromium.launch({
    executablePath: CHROMIUM_PATH,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--no-first-run",
    ],
  });
});
afterAll(async () => {
  await browser?.close();
  await api?.close();
  await database?.drop();
});

describe("Bull Board in a browser", () => {
  it("renders the queue without a single request to another origin", async () => {
    const context = await browser.newContext({ httpCredentials: { username: "admin", password: "s3cret" } });
    try {
      const page = await context.newPage();
      const requested: string[] = [];
      page.on("request", (request) => requested.push(request.url()));
      page.on("websocket", (socket) => requested.push(socket.url()));

      const response = await page.goto(`${api.baseUrl}/admin/queues`, { waitUntil: "networkidle" });
      expect(response?.status()).toBe(200);
      // The app has rendered, from its own API: our queue is listed on the page.
      await page.getByText("deliveries").first().waitFor({ timeout: 15_000 });
      await page.waitForLoadState("networkidle");

      const network = requested.filter((url) => /^(https?|wss?):/.test(url));
      expect(network.length).toBeGreaterThan(3);
      const origin = new URL(api.baseUrl).origin;
      expect(network.filter((url) => new URL(url).origin !== origin)).toEqual([]);
    } finally {
      await context.close();
    }
  });
});

describe("Bull Board's tabs", () => {
  it("survive a reload and a bookmark, with or without a trailing slash", async () => {
    const context = await browser.newContext({ httpCredentials: { username: "admin", password: "s3cret" } });
    try {
      const page = await context.newPage();
      await page.goto(`${api.baseUrl}/admin/queues`, { waitUntil: "networkidle" });
      // The overview's tabs, as the page links them: /admin/queues/?status=delayed.
      await page.locator('a[href$="status=delayed"]').first().click();
      await page.waitForURL(/status=delayed/);
      const reloaded = await page.reload({ waitUntil: "networkidle" });
      expect(reloaded?.status()).toBe(200);
      expect(reloaded?.headers()["content-type"]).toContain("text/html");
      await page.getByText("deliveries").first().waitFor({ timeout: 15_000 });

      // Each page of the dashboard, opened directly as a bookmark would, in both forms.
      for (const path of [
        "/admin/queues/",
        "/admin/queues/?status=failed",
        "/admin/queues/queue/deliveries",
        "/admin/queues/queue/deliveries/",
        "/admin/queues/queue/deliveries/?status=completed",
      ]) {
        const opened = await page.goto(`${api.baseUrl}${path}`, { waitUntil: "networkidle" });
        expect({ path, status: opened?.status() }).toEqual({ path, status: 200 });
        await page.getByText("deliveries").first().waitFor({ timeout: 15_000 });
      }
      // Not a page of the dashboard: still a 404.
      expect((await page.goto(`${api.baseUrl}/admin/queues/nothing/`))?.status()).toBe(404);
    } finally {
      await context.close();
    }
  });
});

describe("Bull Board and other sites", () => {
  it("refuses a form another site posts with the operator's credentials, and takes the dashboard's own writes", async () => {
    const context = await browser.newContext({ httpCredentials: { username: "admin", password: "s3cret" } });
    const queue = api.queue.queues[0]!;
    try {
      const page = await context.newPage();
      await page.goto(`${api.baseUrl}/admin/queues`, { waitUntil: "networkidle" });
      // The dashboard's requests are same-origin: they pass.
      expect(
        await page.evaluate(
          `fetch("/admin/queues/api/queues/deliveries/pause", { method: "PUT" }).then((response) => response.status)`,
        ),
      ).toBe(200);
      expect(
        await page.evaluate(
          `fetch("/admin/queues/api/queues/deliveries/resume", { method: "PUT" }).then((response) => response.status)`,
        ),
      ).toBe(200);

      // Another site's page posts a text/plain form whose body reads as JSON to Bull Board's API.
      const target = `${api.baseUrl}/admin/queues/api/queues/deliveries/add`;
      await page.route("http://attacker.example/**", (route) =>
        route.fulfill({
          contentType: "text/html",
          body: `<form method="post" action="${target}" enctype="text/plain"><input name='{"name":"injected","data":{"x":"' value='"}}'></form><script>document.forms[0].submit()</script>`,
        }),
      );
      const posted = page.waitForResponse((response) => response.url() === target);
      await page.goto("http://attacker.example/");
      const answer = await posted;
      // Sent from the other site's page (over http, Chromium leaves Sec-Fetch-Site out: the Origin tells).
      expect((await answer.request().allHeaders()).origin).toBe("http://attacker.example");
      expect(answer.status()).toBe(403);
      expect(await queue.getWaitingCount()).toBe(0);
    } finally {
      await context.close();
    }
  });
});

describe("the API docs in a browser", () => {
  it("work under their content security policy, load nothing from another origin, and keep no key in storage", async () => {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      const problems: string[] = [];
      const requested: string[] = [];
      page.on("console", (message) => {
        // The browser asks for /favicon.ico on its own; the API has none.
        if (message.location().url.endsWith("/favicon.ico")) return;
        if (message.type() === "error" || /Content Security Policy|Refused to/i.test(message.text()))
          problems.push(message.text());
      });
      page.on("pageerror", (error) => problems.push(error.message));
      page.on("request", (request) => requested.push(request.url()));
      // In the page, as text: this project's TypeScript has no DOM types.
      await page.addInitScript({
        content: `document.addEventListener("securitypolicyviolation", (event) => console.error("CSP violation: " + event.violatedDirective + " " + event.blockedURI));`,
      });

      const response = await page.goto(`${api.baseUrl}/docs`, { waitUntil: "networkidle" });
      expect(response?.headers()["content-security-policy"]).toContain("script-src 'self';");
      expect(response?.headers()["x-frame-options"]).toBe("DENY");
      // Swagger UI ran (from the init script asset: an inline one would be refused) and read /openapi.json.
      await page.locator(".opblock").first().waitFor({ timeout: 15_000 });
      expect(await page.locator(".opblock").count()).toBeGreaterThanOrEqual(15);

      // An operator authorizes with a key and tries an operation: the request is allowed
      // (connect-src 'self'), and the key is not written to this origin's localStorage.
      await page.locator(".auth-wrapper .btn.authorize").click();
      await page.locator(".modal-ux input").first().fill(TEST_API_KEY);
      await page.locator(".modal-ux .btn.modal-btn.auth.authorize").click();
      await page.locator(".modal-ux .btn-done").click();
      const listDeliveries = page.locator("#operations-Deliveries-listDeliveries");
      await listDeliveries.locator(".opblock-summary").click();
      await listDeliveries.locator(".try-out__btn").click();
      await listDeliveries.locator(".btn.execute").click();
      await listDeliveries
        .locator(".live-responses-table .response-col_status", { hasText: "200" })
        .waitFor({ timeout: 10_000 });
      expect(await page.evaluate("Object.keys(window.localStorage)")).toEqual([]);

      expect(problems).toEqual([]);
      const origin = new URL(api.baseUrl).origin;
      expect(requested.filter((url) => /^(https?|wss?):/.test(url) && new URL(url).origin !== origin)).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
