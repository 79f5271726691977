import { Gauge, type Registry } from "prom-client";
import type { DeliveryQueue } from "./delivery-queue.ts";

/** Queue depth by job state, read from Redis when Prometheus scrapes. */
export function registerQueueDepthGauge(registry: Registry, queue: DeliveryQueue): void {
  new Gauge({
    name: "webhook_queue_jobs",
    help: "Jobs in the deliveries queue (all its shards), by state",
    labelNames: ["state"],
    registers: [registry],
    async collect() {
      try {
        for (const [state, count] of Object.entries(await queue.depth())) this.set({ state }, count);
      } catch {
        // Redis unreachable: report nothing rather than failing the whole scrape.
        this.reset();
      }
    },
  });
}
