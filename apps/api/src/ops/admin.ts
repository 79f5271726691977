import { createBullBoard } from "@bull-board/api";
import { BullMQAdapter } from "@bull-board/api/bullMQAdapter";
import { HonoAdapter } from "@bull-board/hono";
import { serveStatic } from "@hono/node-server/serve-static";
import { settlesWithin } from "@webhooks/core";
import type { DeliveryQueue } from "@webhooks/queue";
import { type Context, Hono, type MiddlewareHandler } from "hono";
import { basicAuth } from "hono/basic-auth";
import { ApiError } from "../http/api-error.ts";
import { type AuthFailureThrottle, clientAddress, tooManyFailedAuthentications } from "../http/auth-throttle.ts";
import type { ApiEnv } from "../http/types.ts";

export const ADMIN_BASE_PATH = "/admin/queues";

/**
 * Bull Board's page template links its fonts from Google Fonts, and no option of the library
 * turns that off. Our pages load nothing from another origin (it would tell a third party who
 * opens the dashboard, and offline the page would wait for it), so every `<link>` to an absolute
 * URL is cut from the page as it leaves; the UI falls back to the system font.
 */
const LINK_TO_OTHER_ORIGIN = /<link\b[^>]*\bhref="(?:https?:)?\/\/[^"]*"[^>]*>\s*/gi;

/**
 * Bull Board, the queue dashboard, behind HTTP Basic auth (docs/operations.md#bull-board). An
 * address over the failure limit is answered 429 whatever it sends, right password or not: a
 * password can be guessed, and letting the right one through would tell the guesser when it was
 * right.
 *
 * A browser that has the Basic credentials sends them with every request to this origin, also
 * those another site's page makes it send: a form posted cross-site (`enctype="text/plain"`, with
 * a body that reads as JSON) would reach Bull Board's API and add, retry or delete jobs. Basic
 * auth has no token to check, so every request that is not a GET or HEAD must come from the
 * dashboard's own origin (refuseCrossSiteWrites). The dashboard may not be framed either, so
 * that no other page can click its buttons for the operator.
 */
export function adminRoutes(
  queue: DeliveryQueue,
  credentials: { username: string; password: string },
  throttle: AuthFailureThrottle,
) {
  const serverAdapter = new HonoAdapter(serveStatic);
  serverAdapter.setBasePath(ADMIN_BASE_PATH);
  createBullBoard({
    queues: boardQueues(queue),
    serverAdapter,
    options: { uiConfig: { boardTitle: "Webhook deliveries" } },
  });
  const app = new Hono<ApiEnv>();
  // First: a cross-site request is refused before it can count as a failed password or reach Bull Board.
  app.use("*", async (c, next) => {
    c.header("x-frame-options", "DENY");
    c.header("content-security-policy", "frame-ancestors 'none'");
    refuseCrossSiteWrites(c);
    await next();
  });
  app.use("*", async (c, next) => {
    const address = clientAddress(c);
    const retryAfter = throttle.retryAfterSeconds(address);
    if (retryAfter > 0) throw tooManyFailedAuthentications(retryAfter);
    await next();
    // basicAuth's 401 has been turned into a response by the error handler by now.
    if (c.res.status === 401) throttle.recordFailure(address);
  });
  app.use("*", basicAuth({ ...credentials, realm: "Webhook delivery service admin" }));
  app.use("/api/*", answerWithoutRedis(queue));
  app.use("*", async (c, next) => {
    await next();
    if (!c.res.headers.get("content-type")?.startsWith("text/html")) return;
    const headers = new Headers(c.res.headers);
    headers.delete("content-length");
    c.res = new Response((await c.res.text()).replace(LINK_TO_OTHER_ORIGIN, ""), { status: c.res.status, headers });
  });
  const board = serverAdapter.registerPlugin();
  app.use("*", servePagesWithTrailingSlash(board));
  app.route("/", board);
  return app;
}

/** Bull Board's pages, relative to its base path, in the form its own links give them: with a trailing slash. */
const PAGE_WITH_TRAILING_SLASH = [
  /^\/$/,
  /^\/metrics-history\/$/,
  /^\/job-schedulers\/$/,
  /^\/queue\/[^/]+\/$/,
  /^\/queue\/[^/]+\/[^/]+\/$/,
];

/**
 * Bull Board's tabs link its pages with a trailing slash (`/admin/queues/?status=delayed`), which
 * its routes do not take: a reload or a bookmark of a tab would get a 404. Those paths get the
 * same page as the path without the slash, and the page's own router shows the tab.
 */
function servePagesWithTrailingSlash(board: Hono): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    const path = c.req.path.slice(ADMIN_BASE_PATH.length);
    if (
      (c.req.method !== "GET" && c.req.method !== "HEAD") ||
      !PAGE_WITH_TRAILING_SLASH.some((page) => page.test(path))
    ) {
      return next();
    }
    const url = new URL(c.req.url);
    url.pathname = path === "/" ? "/" : path.slice(0, -1);
    return board.fetch(new Request(url, { method: c.req.method, headers: c.req.raw.headers }));
  };
}

/** How long the dashboard's API waits for Redis before it answers 503. */
const ADMIN_REDIS_DEADLINE_MS = 5_000;

/**
 * Bull Board's JSON API (what the page calls) reads Redis on every request. With Redis down its own
 * handler answers a 500 in a shape of its own, carrying ioredis's message; with Redis stalled it
 * never answers. Either is a 503 in the API's error shape, with Retry-After; any other failure of
 * Bull Board's is logged and answered as our 500.
 */
function answerWithoutRedis(queue: DeliveryQueue): MiddlewareHandler<ApiEnv> {
  const unavailable = () =>
    new ApiError(
      503,
      "api_error",
      "service_unavailable",
      "The queue dashboard cannot reach Redis. Try again shortly.",
      undefined,
      { "retry-after": "5" },
    );
  return async (c, next) => {
    if (!queue.connected) throw unavailable();
    const handled = next();
    if (!(await settlesWithin(handled, ADMIN_REDIS_DEADLINE_MS))) throw unavailable();
    await handled;
    if (c.res.status < 500) return;
    if (!queue.connected) throw unavailable();
    const detail = await c.res.clone().text();
    c.var.logger.error({ status: c.res.status, detail: detail.slice(0, 500) }, "the queue dashboard failed");
    throw new ApiError(
      500,
      "api_error",
      "internal_error",
      "The queue dashboard failed; the error is logged with this request's id.",
    );
  };
}

/**
 * Throws a 403 for a request that changes something (any method but GET and HEAD) when a browser
 * sent it on another site's behalf. Browsers say where a request comes from in `Sec-Fetch-Site`;
 * older ones only in `Origin`, compared with the Host the request was sent to. A client that
 * sends neither is not a browser (curl, scripts with the credentials) and is let through. Behind
 * a proxy that rewrites Host, a browser without Sec-Fetch-Site is refused: the safe side.
 */
function refuseCrossSiteWrites(c: Context<ApiEnv>) {
  if (c.req.method === "GET" || c.req.method === "HEAD") return;
  const fetchSite = c.req.header("sec-fetch-site");
  const origin = c.req.header("origin");
  const crossSite =
    fetchSite !== undefined
      ? fetchSite !== "same-origin"
      : origin !== undefined && originHost(origin) !== c.req.header("host")?.toLowerCase();
  if (crossSite) {
    throw new ApiError(
      403,
      "permission_error",
      "cross_site_request",
      "The queue dashboard takes changes only from its own pages, not from another site",
    );
  }
}

/** The host[:port] of an Origin header; undefined for `null` (sandboxed frames, some redirects) or anything unparsable. */
function originHost(origin: string): string | undefined {
  try {
    return new URL(origin).host;
  } catch {
    return undefined;
  }
}

/**
 * Every shard's queue. Bull Board tells queues apart by their name (the adapter's prefix + the
 * queue's name), which the shards share, so each gets its shard number in front.
 */
function boardQueues(queue: DeliveryQueue): BullMQAdapter[] {
  if (queue.queues.length === 1) return queue.queues.map((only) => new BullMQAdapter(only));
  return queue.queues.map(
    (shard, index) =>
      new BullMQAdapter(shard, {
        prefix: `shard-${index}-`,
        displayName: `${shard.name} (shard ${index} of ${queue.queues.length})`,
        description: `Redis keys ${shard.opts.prefix}:${shard.name}:*`,
      }),
  );
}
