import { withDeadline } from "@webhooks/core";
import { countSubscriptionsByHealth, listHeldSubscriptionIds, type PrismaClientOrTransaction } from "@webhooks/db";
import type { DeliveryQueue } from "@webhooks/queue";
import { registerQueueDepthGauge, SCRAPE_DEADLINE_MS } from "@webhooks/queue";
import type { MiddlewareHandler } from "hono";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { ApiEnv } from "../http/types.ts";

/**
 * Endpoint health (docs/api.md#endpoint-health), read-only, from PostgreSQL when Prometheus
 * scrapes: the workers keep it in the subscriptions table, so any API process can report it.
 */
function registerSubscriptionHealthGauges(registry: Registry, db: PrismaClientOrTransaction): void {
  new Gauge({
    name: "webhook_subscriptions",
    help: "Subscriptions (not deleted) by health: healthy, failing, circuit_open, or disabled by the service",
    labelNames: ["health"],
    registers: [registry],
    async collect() {
      try {
        const counts = await withDeadline(
          countSubscriptionsByHealth({ db }, new Date()),
          SCRAPE_DEADLINE_MS,
          "PostgreSQL",
        );
        for (const [health, count] of Object.entries(counts)) this.set({ health }, count);
      } catch {
        // Database unreachable or stalled: report nothing rather than failing or holding the whole scrape.
        this.reset();
      }
    },
  });
  new Gauge({
    name: "webhook_subscription_circuit_open",
    help: "1 for each subscription whose attempts are held: circuit open, or a Retry-After not yet over",
    labelNames: ["subscription_id"],
    registers: [registry],
    async collect() {
      // Only the held subscriptions are reported: one that recovered must drop out of the series.
      this.reset();
      try {
        const held = await withDeadline(listHeldSubscriptionIds({ db }, new Date()), SCRAPE_DEADLINE_MS, "PostgreSQL");
        for (const subscriptionId of held) this.set({ subscription_id: subscriptionId }, 1);
      } catch {
        // As above: nothing rather than a failed scrape.
      }
    },
  });
}

/** The API's Prometheus metrics. The worker exposes the delivery outcomes on its own port. */
export function createApiMetrics(queue: DeliveryQueue, db: PrismaClientOrTransaction) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  registerQueueDepthGauge(registry, queue);
  registerSubscriptionHealthGauges(registry, db);
  const requests = new Histogram({
    name: "webhook_api_request_duration_seconds",
    help: "HTTP requests handled by the API, by route and status",
    labelNames: ["method", "route", "status"],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  const eventsPublished = new Counter({
    name: "webhook_events_published_total",
    help: "Events accepted",
    registers: [registry],
  });

  const measure: MiddlewareHandler<ApiEnv> = async (c, next) => {
    const stop = requests.startTimer();
    await next();
    // The route pattern, not the path, keeps the label set small.
    stop({ method: c.req.method, route: c.req.routePath, status: String(c.res.status) });
    if (c.req.routePath === "/v1/events" && c.res.status === 202) eventsPublished.inc();
  };
  return { registry, measure };
}
