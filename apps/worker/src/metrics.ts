import { type DeliveryQueue, registerQueueDepthGauge } from "@webhooks/queue";
import { Counter, collectDefaultMetrics, Histogram, Registry } from "prom-client";

/** The worker's Prometheus metrics, served on WORKER_METRICS_PORT. */
export function createWorkerMetrics(queue: DeliveryQueue) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  registerQueueDepthGauge(registry, queue);
  return {
    registry,
    attempts: new Counter({
      name: "webhook_delivery_attempts_total",
      help: "Delivery attempts by outcome: delivered, retry_scheduled, failed (no retry left), unknown (its worker died mid-send)",
      labelNames: ["outcome"],
      registers: [registry],
    }),
    attemptDuration: new Histogram({
      name: "webhook_delivery_attempt_duration_seconds",
      help: "Time from sending a webhook to having its response (or giving up)",
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30],
      registers: [registry],
    }),
    waits: new Counter({
      name: "webhook_delivery_waits_total",
      help: "Times a due delivery waited at the gate instead of being attempted, by reason (max_in_flight, origin_max_in_flight, rate_limit, retry_after, circuit_open, disabled, in_line)",
      labelNames: ["reason"],
      registers: [registry],
    }),
    healthChanges: new Counter({
      name: "webhook_subscription_health_changes_total",
      help: "Subscription health changes: circuit_opened, circuit_closed, disabled",
      labelNames: ["change"],
      registers: [registry],
    }),
    reconcilerEnqueued: new Counter({
      name: "webhook_reconciler_enqueued_total",
      help: "Due deliveries the reconciler found without a job and enqueued again, or with a job parked far past their time and ran now",
      registers: [registry],
    }),
    reconcilerScanned: new Counter({
      name: "webhook_reconciler_scanned_total",
      help: "Due deliveries the reconciler checked for a job (its work: proportional to what came due, not to the backlog)",
      registers: [registry],
    }),
    prunedRows: new Counter({
      name: "webhook_pruned_rows_total",
      help: "Rows the pruner deleted past RETENTION, by table: deliveries, delivery_attempts, events, endpoint_credentials",
      labelNames: ["table"],
      registers: [registry],
    }),
    jobErrors: new Counter({
      name: "webhook_job_errors_total",
      help: "Delivery jobs that failed for our own reasons (database unreachable, ...), not the receiver's",
      registers: [registry],
    }),
  };
}

export type WorkerMetrics = ReturnType<typeof createWorkerMetrics>;
