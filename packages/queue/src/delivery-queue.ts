import { jobCatalog, type DeliveryJob } from "@webhooks/core";
import { Queue } from "bullmq";
import type { Redis } from "ioredis";

const catalog = jobCatalog.deliveries;

export type DeliveriesQueue = Queue<DeliveryJob, void, typeof catalog.jobName>;

/**
 * The producer side of the deliveries queue. The job id is the delivery id, so adding one that
 * already has a job does nothing: the API, the reconciler and a manual resend can all call
 * `enqueue` for the same delivery safely.
 */
export class DeliveryQueue {
  readonly queue: DeliveriesQueue;

  constructor(
    private readonly redis: Redis,
    prefix: string,
  ) {
    this.queue = new Queue<DeliveryJob, void, typeof catalog.jobName>(catalog.queueName, {
      connection: redis,
      prefix,
      defaultJobOptions: catalog.defaultJobOptions,
    });
  }

  async enqueue(deliveryIds: string[]): Promise<void> {
    if (deliveryIds.length === 0) return;
    await this.queue.addBulk(
      deliveryIds.map((deliveryId) => ({ name: catalog.jobName, data: { deliveryId }, opts: { jobId: deliveryId } })),
    );
  }

  async bringForward(deliveryId: string): Promise<void> {
    const job = await this.queue.getJob(deliveryId);
    if (job && (await job.isDelayed())) {
      await job.promote();
      return;
    }
    // A waiting or active job runs soon anyway; a finished job has already left Redis.
    await this.enqueue([deliveryId]);
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

  /** Jobs by state, for the queue-depth metric. */
  async depth(): Promise<Record<string, number>> {
    return this.queue.getJobCounts("waiting", "active", "delayed", "prioritized", "failed");
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}
