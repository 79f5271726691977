import { withDeadline } from "@webhooks/core";
import { Gauge, type Registry } from "prom-client";
import type { DeliveryQueue } from "./delivery-queue.ts";

/**
 * How long a scrape waits for Redis. A Redis that has stopped answering without closing the
 * connection (stalled, or a network that drops packets) would otherwise hold the scrape forever.
 */
export const SCRAPE_DEADLINE_MS = 2_000;

/** Queue depth by job state, and the deliveries dispatch jobs hold, read from Redis when Prometheus scrapes. */
export function registerQueueDepthGauge(registry: Registry, queue: DeliveryQueue): void {
  new Gauge({
    name: "webhook_queue_jobs",
    help: "Jobs in the deliveries queue (all its shards), by state",
    labelNames: ["state"],
    registers: [registry],
    async collect() {
      try {
        for (const [state, count] of Object.entries(await withDeadline(queue.depth(), SCRAPE_DEADLINE_MS, "Redis")))
          this.set({ state }, count);
      } catch {
        // Redis unreachable or stalled: report nothing rather than failing or holding the whole scrape.
        this.reset();
      }
    },
  });
  new Gauge({
    name: "webhook_queue_dispatching_deliveries",
    help: "New deliveries that dispatch jobs (up to 20 deliveries each) hold, not yet attempted or given a job of their own",
    registers: [registry],
    async collect() {
      try {
        this.set(await withDeadline(queue.dispatching(), SCRAPE_DEADLINE_MS, "Redis"));
      } catch {
        this.reset();
      }
    },
  });
}
