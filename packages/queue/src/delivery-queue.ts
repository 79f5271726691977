import { jobCatalog, withDeadline, type DeliveryJob } from "@webhooks/core";
import { Queue } from "bullmq";
import type { Redis } from "ioredis";
import type { Wake } from "./delivery-gate.ts";

const catalog = jobCatalog.deliveries;

export interface ReconcilerState {
  /** Due deliveries up to this time (database clock) have been checked for a job. */
  watermark: Date;
  /** Where the rolling sweep over every due delivery goes on from. */
  sweep: { nextAttemptAt: Date; id: string } | undefined;
}
const ENQUEUE_TIMEOUT_MS = 2_000;


/**
 * The producer side of the deliveries queue. The job id is the delivery id, so adding one that
 * already has a job does nothing: the API, the reconciler and a manual resend can all call
 * `enqueue` for the same delivery safely.
 */
export class DeliveryQueue {
  /** The BullMQ queue itself (Bull Board shows it). */
  readonly queue: Queue<DeliveryJob, void, typeof catalog.jobName>;
  #lastErrorLog = 0;

  constructor(
    private readonly redis: Redis,
    prefix: string,
    logger?: { warn(details: object, message: string): void },
  ) {
    this.queue = new Queue<DeliveryJob, void, typeof catalog.jobName>(catalog.queueName, {
      connection: redis,
      prefix,
      defaultJobOptions: catalog.defaultJobOptions,
    });
    // Without a listener BullMQ prints every connection error; log them, at most every 10 s.
    this.queue.on("error", (error) => {
      if (Date.now() - this.#lastErrorLog < 10_000) return;
      this.#lastErrorLog = Date.now();
      logger?.warn({ err: error }, "deliveries queue: Redis error");
    });
  }

  async enqueue(deliveryIds: string[]): Promise<void> {
    if (deliveryIds.length === 0) return;
    // addBulk builds a MULTI pipeline; for the common single job a plain add is cheaper.
    const [only] = deliveryIds;
    if (deliveryIds.length === 1 && only !== undefined) {
      await this.#failFast(() => this.queue.add(catalog.jobName, { deliveryId: only }, { jobId: only }));
      return;
    }
    await this.#failFast(() =>
      this.queue.addBulk(deliveryIds.map((deliveryId) => ({ name: catalog.jobName, data: { deliveryId }, opts: { jobId: deliveryId } }))),
    );
  }

  async bringForward(deliveryId: string): Promise<void> {
    const job = await this.#failFast(() => this.queue.getJob(deliveryId));
    if (job && (await job.isDelayed())) {
      await job.promote();
      return;
    }
    // A waiting or active job runs soon anyway; a finished job has already left Redis.
    await this.enqueue([deliveryId]);
  }

  /**
   * Runs each parked delivery's job at its time (the gate's wakes): a delayed job is promoted or
   * re-timed; a job that is missing is added. A job that is active right now is left alone: it is
   * the one parking itself, and it looks for its turn once parked (see the worker).
   */
  async wake(wakes: Wake[]): Promise<void> {
    await Promise.all(wakes.map((wake) => this.#wakeOne(wake)));
  }

  async #wakeOne({ deliveryId, at }: Wake): Promise<void> {
    const delay = Math.max(0, at - Date.now());
    const job = await this.queue.getJob(deliveryId);
    if (!job) {
      await this.queue.add(catalog.jobName, { deliveryId }, { jobId: deliveryId, delay });
      return;
    }
    try {
      if (!(await job.isDelayed())) return;
      if (delay === 0) await job.promote();
      else await job.changeDelay(delay);
    } catch {
      // It left the delayed state meanwhile (promoted by another waker, or started): fine.
    }
  }

  /**
   * A request must not wait on a Redis that is down: BullMQ would wait for the connection
   * forever. The caller has committed to PostgreSQL already and the reconciler will enqueue.
   */
  async #failFast<T>(operation: () => Promise<T>): Promise<T> {
    if (this.redis.status !== "ready") throw new Error(`Redis is not connected (${this.redis.status})`);
    return withDeadline(operation(), ENQUEUE_TIMEOUT_MS, "Redis");
  }

  /** The deliveries among these that have no job in Redis at all. */
  async withoutJob(deliveryIds: string[]): Promise<string[]> {
    if (deliveryIds.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const id of deliveryIds) pipeline.exists(this.queue.toKey(id));
    const replies = (await pipeline.exec()) ?? [];
    return deliveryIds.filter((_, index) => {
      const [error, exists] = replies[index] ?? [null, 1];
      if (error) throw error;
      return exists === 0;
    });
  }

  /**
   * Where the reconciler left off, kept in Redis on purpose: if Redis loses its data, this goes
   * with the jobs, and the next pass knows to check everything.
   */
  async reconcilerState(): Promise<ReconcilerState | undefined> {
    const fields = await this.redis.hgetall(this.#reconcilerKey);
    if (!fields.watermark) return undefined;
    return {
      watermark: new Date(Number(fields.watermark)),
      sweep: fields.sweep_at && fields.sweep_id ? { nextAttemptAt: new Date(Number(fields.sweep_at)), id: fields.sweep_id } : undefined,
    };
  }

  async saveReconcilerState(state: ReconcilerState): Promise<void> {
    await this.redis
      .multi()
      .del(this.#reconcilerKey)
      .hset(this.#reconcilerKey, {
        watermark: state.watermark.getTime(),
        ...(state.sweep ? { sweep_at: state.sweep.nextAttemptAt.getTime(), sweep_id: state.sweep.id } : {}),
      })
      .exec();
  }

  get #reconcilerKey(): string {
    return `${this.queue.opts.prefix}:${catalog.queueName}:reconciler`;
  }

  /** Jobs by state, for the queue-depth metric. */
  async depth(): Promise<Record<string, number>> {
    return this.queue.getJobCounts("waiting", "active", "delayed", "prioritized", "failed");
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}
