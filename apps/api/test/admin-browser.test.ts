import { createTestDatabase, testConfig, type TestDatabase } from "@webhooks/testing";
import { startTestApi, type TestApi } from "@webhooks/api/testing";
import { chromium, type Browser } from "playwright-core";
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
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"],
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
