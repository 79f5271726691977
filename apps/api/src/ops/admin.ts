import { createBullBoard } from "@bull-board/api";
import { BullMQAdapter } from "@bull-board/api/bullMQAdapter";
import { HonoAdapter } from "@bull-board/hono";
import { serveStatic } from "@hono/node-server/serve-static";
import type { DeliveryQueue } from "@webhooks/queue";
import { Hono } from "hono";
import { basicAuth } from "hono/basic-auth";
import type { ApiEnv } from "../http/types.ts";

export const ADMIN_BASE_PATH = "/admin/queues";

/** Bull Board, the queue dashboard, behind HTTP Basic auth (contract §3). */
export function adminRoutes(queue: DeliveryQueue, credentials: { username: string; password: string }) {
  const serverAdapter = new HonoAdapter(serveStatic);
  serverAdapter.setBasePath(ADMIN_BASE_PATH);
  createBullBoard({ queues: [new BullMQAdapter(queue.queue)], serverAdapter, options: { uiConfig: { boardTitle: "Webhook deliveries" } } });
  const app = new Hono<ApiEnv>();
  app.use("*", basicAuth({ ...credentials, realm: "Webhook delivery service admin" }));
  app.route("/", serverAdapter.registerPlugin());
  return app;
}
