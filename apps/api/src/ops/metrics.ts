import type { DeliveryQueue } from "@webhooks/queue";
import { registerQueueDepthGauge } from "@webhooks/queue";
import type { MiddlewareHandler } from "hono";
import { collectDefaultMetrics, Counter, Histogram, Registry } from "prom-client";
import type { ApiEnv } from "../http/types.ts";

/** The API's Prometheus metrics. The worker exposes the delivery outcomes on its own port. */
export function createApiMetrics(queue: DeliveryQueue) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  registerQueueDepthGauge(registry, queue);
  const requests = new Histogram({
    name: "webhook_api_request_duration_seconds",
    help: "HTTP requests handled by the API, by route and status",
    labelNames: ["method", "route", "status"],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  const eventsPublished = new Counter({ name: "webhook_events_published_total", help: "Events accepted", registers: [registry] });

  const measure: MiddlewareHandler<ApiEnv> = async (c, next) => {
    const stop = requests.startTimer();
    await next();
    // The route pattern, not the path, keeps the label set small.
    stop({ method: c.req.method, route: c.req.routePath, status: String(c.res.status) });
    if (c.req.routePath === "/v1/events" && c.res.status === 202) eventsPublished.inc();
  };
  return { registry, measure };
}
