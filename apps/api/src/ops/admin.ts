import { createBullBoard } from "@bull-board/api";
import { BullMQAdapter } from "@bull-board/api/bullMQAdapter";
import { HonoAdapter } from "@bull-board/hono";
import { serveStatic } from "@hono/node-server/serve-static";
import type { DeliveryQueue } from "@webhooks/queue";
import { Hono } from "hono";
import { basicAuth } from "hono/basic-auth";
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
 * Bull Board, the queue dashboard, behind HTTP Basic auth (contract §3). An address over the
 * failure limit is answered 429 whatever it sends, right password or not: a password can be
 * guessed, and letting the right one through would tell the guesser when it was right.
 */
export function adminRoutes(queue: DeliveryQueue, credentials: { username: string; password: string }, throttle: AuthFailureThrottle) {
  const serverAdapter = new HonoAdapter(serveStatic);
  serverAdapter.setBasePath(ADMIN_BASE_PATH);
  createBullBoard({ queues: boardQueues(queue), serverAdapter, options: { uiConfig: { boardTitle: "Webhook deliveries" } } });
  const app = new Hono<ApiEnv>();
  app.use("*", async (c, next) => {
    const address = clientAddress(c);
    const retryAfter = throttle.retryAfterSeconds(address);
    if (retryAfter > 0) throw tooManyFailedAuthentications(retryAfter);
    await next();
    // basicAuth's 401 has been turned into a response by the error handler by now.
    if (c.res.status === 401) throttle.recordFailure(address);
  });
  app.use("*", basicAuth({ ...credentials, realm: "Webhook delivery service admin" }));
  app.use("*", async (c, next) => {
    await next();
    if (!c.res.headers.get("content-type")?.startsWith("text/html")) return;
    const headers = new Headers(c.res.headers);
    headers.delete("content-length");
    c.res = new Response((await c.res.text()).replace(LINK_TO_OTHER_ORIGIN, ""), { status: c.res.status, headers });
  });
  app.route("/", serverAdapter.registerPlugin());
  return app;
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
