import type { Logger } from "@webhooks/core";
import { findDueDeliveries, withReconcilerLock, type SqlClient } from "@webhooks/db";
import type { DeliveryGate, DeliveryQueue } from "@webhooks/queue";
import type { WorkerMetrics } from "./metrics.ts";

const BATCH = 500;
/** A job due this recently is probably about to run; leave it to the queue. */
const GRACE_MS = 1_000;

/**
 * PostgreSQL is the source of truth, Redis the fast path (contract §7). If Redis loses jobs (a
 * flush, a failover, an API that could not reach it when the event was published), deliveries
 * are still due in PostgreSQL. The reconciler walks the due ones and enqueues those without a
 * job. Job id = delivery id, so even if two reconcilers raced, nothing would be queued twice.
 */
export class Reconciler {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #stopped = false;

  constructor(
    private readonly deps: { sql: SqlClient; queue: DeliveryQueue; gate: DeliveryGate; logger: Logger; metrics: WorkerMetrics },
    private readonly intervalMs: number,
  ) {}

  start(): void {
    this.#stopped = false;
    this.#schedule(0);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running;
  }

  /**
   * One pass; returns how many deliveries it enqueued (0 when another worker holds the lock).
   * Each batch is one short statement; the Redis calls happen between them, outside any
   * transaction.
   */
  async reconcileOnce(): Promise<number> {
    const enqueued = await withReconcilerLock({ sql: this.deps.sql }, async (sql) => {
      let count = 0;
      let after: { nextAttemptAt: Date; id: string } | undefined;
      for (;;) {
        const due = await findDueDeliveries({ sql }, { graceMs: GRACE_MS, limit: BATCH, after });
        if (due.length === 0) break;
        const missing = await this.deps.queue.withoutJob(due.map((row) => row.id));
        await this.deps.queue.enqueue(missing);
        count += missing.length;
        after = due[due.length - 1];
        if (due.length < BATCH || this.#stopped) break;
      }
      return count;
    });
    return enqueued ?? 0;
  }

  /**
   * The gate's safety net: a subscription's line whose turn was lost (a worker died between
   * deciding and waking) gets its head woken. Costs a call per subscription with a line.
   */
  async nudgeLines(): Promise<number> {
    const wakes = await this.deps.gate.nudgeAll();
    await this.deps.queue.wake(wakes);
    return wakes.length;
  }

  #schedule(delayMs: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#running = Promise.all([this.reconcileOnce(), this.nudgeLines()])
        .then(([enqueued]) => enqueued)
        .then((enqueued) => {
          if (enqueued > 0) {
            this.deps.metrics.reconcilerEnqueued.inc(enqueued);
            this.deps.logger.warn({ enqueued }, "reconciler enqueued deliveries that had no job");
          }
        })
        .catch((error: unknown) => this.deps.logger.error({ err: error }, "reconciler pass failed; will try again"))
        .finally(() => this.#schedule(this.intervalMs));
    }, delayMs);
  }
}
