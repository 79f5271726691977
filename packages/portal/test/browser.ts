// What the portal's browser tests share: the stack (stack.ts), one Chromium, a fresh context per
// session with everything the page asked for recorded, links for a tenant, and screenshots.
import { mkdir } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import type { TestReceiver } from "@webhooks/testing";
import axe from "axe-core";
import { type Browser, type BrowserContext, chromium, type Locator, type Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, expect } from "vitest";
import { type PortalStack, startPortalStack } from "./stack.ts";

// Debian's chromium, driven by playwright-core (no browser download); CHROMIUM_PATH points
// elsewhere on machines that keep it elsewhere.
const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
/** Screenshots the tests take, kept by CI as artifacts (git-ignored). */
const SCREENSHOTS = fileURLToPath(new URL("../../../artifacts/portal/", import.meta.url));

/** The tenant whose people use the portal in these tests; another one's session must see none of it. */
export const TENANT = "acme";

export interface Session {
  context: BrowserContext;
  page: Page;
  /** Every URL the page asked for: documents, scripts, styles, fetches, sockets. */
  requested: string[];
  /** Console errors and uncaught exceptions: a CSP violation shows up here. */
  problems: string[];
}

export interface PortalHarness {
  /** Set once the file's beforeAll has run. */
  readonly stack: PortalStack;
  openBrowser(
    viewport?: { width: number; height: number },
    options?: { timezoneId?: string; locale?: string },
  ): Promise<Session>;
  /** The link a team's product hands its customer: a portal session's url, made with the team's unscoped key. */
  portalLink(tenant?: string): Promise<string>;
  /** Nothing was loaded from, or sent to, another origin than `origin`; and the page raised no error. */
  expectSelfContained(session: Session, origin?: string): void;
  shot(page: Page, name: string, fullPage?: boolean): Promise<Buffer>;
  createEndpoint(url: string, events: string[], extra?: Record<string, unknown>): Promise<string>;
  publish(type: string, data: Record<string, unknown>): Promise<void>;
}

/**
 * Registers the file's hooks (start the stack and Chromium before its tests, close them after,
 * close each test's sessions after it, with a screenshot of a failed one) and returns what the
 * tests use.
 */
export function portalHarness(receiverReply: TestReceiver["reply"]): PortalHarness {
  let stack: PortalStack | undefined;
  let browser: Browser | undefined;
  const sessions: Session[] = [];

  beforeAll(async () => {
    stack = await startPortalStack(receiverReply);
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
    await mkdir(SCREENSHOTS, { recursive: true });
  });
  afterAll(async () => {
    await browser?.close();
    await stack?.close();
  });
  afterEach(async ({ task }) => {
    for (const [index, session] of sessions.splice(0).entries()) {
      // What the page showed when a test failed, for whoever reads CI's artifacts.
      if (task.result?.state === "fail")
        await shot(session.page, `failed-${task.name.slice(0, 40).replace(/\W+/g, "-")}-${index}`).catch(() => {});
      await session.context.close();
    }
  });

  const started = (): PortalStack => {
    if (!stack) throw new Error("the portal stack is not started yet (use it inside a test)");
    return stack;
  };
  const shot = (page: Page, name: string, fullPage = true) =>
    page.screenshot({ path: `${SCREENSHOTS}${name}.png`, fullPage });

  return {
    get stack() {
      return started();
    },
    async openBrowser(viewport = { width: 1280, height: 900 }, options = {}) {
      if (!browser) throw new Error("Chromium is not started yet");
      const context = await browser.newContext({ viewport, ...options });
      context.setDefaultTimeout(20_000);
      const page = await context.newPage();
      const session: Session = { context, page, requested: [], problems: [] };
      context.on("request", (request) => session.requested.push(request.url()));
      page.on("websocket", (socket) => session.requested.push(socket.url()));
      page.on("console", (message) => {
        // Chromium logs every 4xx answer as an error; the tests ask for some on purpose.
        if (
          message.type() === "error" &&
          !message.text().startsWith("Failed to load resource: the server responded with a status of 4")
        ) {
          session.problems.push(message.text());
        }
      });
      page.on("pageerror", (error) => session.problems.push(error.message));
      sessions.push(session);
      return session;
    },
    async portalLink(tenant = TENANT) {
      const created = await started().call("POST", "/v1/portal_sessions", { tenant_id: tenant, expires_in: "1h" });
      expect(created.status).toBe(201);
      expect(created.body.url).toBe(`${started().baseUrl}/portal#token=${created.body.token}`);
      return created.body.url;
    },
    expectSelfContained(session, origin = started().baseUrl) {
      const network = session.requested.filter((url) => /^(https?|wss?):/.test(url));
      expect(network.length).toBeGreaterThan(2);
      expect(network.filter((url) => new URL(url).origin !== origin)).toEqual([]);
      expect(session.problems).toEqual([]);
    },
    shot,
    async createEndpoint(url, events, extra = {}) {
      const created = await started().call("POST", "/v1/subscriptions", { url, events, tenant_id: TENANT, ...extra });
      expect(created.status).toBe(201);
      return created.body.id;
    },
    async publish(type, data) {
      expect((await started().call("POST", "/v1/events", { type, data, tenant_id: TENANT })).status).toBe(202);
    },
  };
}

/** The request headers an attempt shows, as [name, value] pairs in order. */
export function headersShown(attempt: Locator): Promise<[string, string][]> {
  return attempt
    .locator("dl.headers")
    .evaluate((list) =>
      [...list.querySelectorAll("dt")].map((term): [string, string] => [
        term.textContent ?? "",
        term.nextElementSibling?.textContent ?? "",
      ]),
    );
}

/** What axe-core finds on the page against WCAG 2.1 A and AA, one line a problem. */
export async function accessibilityProblems(page: Page, view: string): Promise<string[]> {
  // axe-core's own script, run through the DevTools protocol (which the page's CSP does not govern).
  await page.evaluate(axe.source);
  const result = await page.evaluate(() =>
    (window as unknown as { axe: typeof axe }).axe.run(document, {
      runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] },
    }),
  );
  expect(result.passes.length, `axe checked nothing on ${view}`).toBeGreaterThan(10);
  return result.violations.map(
    (violation) => `${view}: ${violation.id} (${violation.nodes.map((node) => node.target.join(" ")).join(", ")})`,
  );
}
