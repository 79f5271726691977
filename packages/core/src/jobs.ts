import { z } from "zod";

/**
 * The job catalog: every queue, its job names and payload schemas in one place, so the
 * API that enqueues and the worker that consumes cannot drift apart.
 *
 * Payloads carry ids only: the worker reads everything else, the secret included, from
 * PostgreSQL. The job id is the delivery id, so enqueueing the same delivery twice (the API after
 * commit, the reconciler, a manual resend) is harmless: BullMQ ignores an add whose id exists.
 */
export const deliveryJobSchema = z.strictObject({
  deliveryId: z.string(),
  /**
   * The delivery's subscription, when the enqueuer knows it: the worker then checks the gate's
   * line in Redis before touching the database (a delivery that would only wait costs nothing).
   */
  subscriptionId: z.string().optional(),
  /**
   * The delivery waited at the gate (its job was parked): when it comes back, its turn is taken
   * out of Redis, so it does not start on room a worker process holds (see the gate), and it is
   * pre-checked first: while it is still in line, it stays parked without a claim.
   */
  waited: z.boolean().optional(),
  /** A test event's delivery that waited (GateInput.test): it skips the pre-check, since it goes ahead of the line. */
  test: z.boolean().optional(),
});
export type DeliveryJob = z.infer<typeof deliveryJobSchema>;

/**
 * A publish's new deliveries, up to `maxDeliveries` of one queue shard, as one job (`dispatch`):
 * BullMQ's work per job (the add, taking it, finishing it, their events) is then paid once per
 * dispatch instead of once per delivery. The worker attempts each of them as it would its own
 * job, and gives a job of its own (id = delivery id) to any that must come back later: a retry,
 * a turn at the gate. A dispatch's id is `dispatch_<its first delivery id>`.
 */
export const dispatchJobSchema = z.strictObject({
  deliveries: z.array(z.strictObject({ deliveryId: z.string(), subscriptionId: z.string().optional() })).min(1),
});
export type DispatchJob = z.infer<typeof dispatchJobSchema>;

export const jobCatalog = {
  deliveries: {
    queueName: "deliveries",
    jobName: "deliver",
    payload: deliveryJobSchema,
    dispatch: { jobName: "dispatch", payload: dispatchJobSchema, maxDeliveries: 20 },
    /**
     * These retries are for our own failures (PostgreSQL unreachable, a crash mid-job), not for
     * the receiver's: a receiver's failure is recorded and rescheduled by the worker itself. Jobs
     * leave Redis when they finish so that the same delivery id can be enqueued again later, and
     * if a job is dropped after its last try the reconciler enqueues the delivery again.
     */
    defaultJobOptions: {
      attempts: 5,
      backoff: { type: "exponential", delay: 1_000 },
      removeOnComplete: true,
      removeOnFail: true,
    },
  },
} as const satisfies Record<
  string,
  {
    queueName: string;
    jobName: string;
    payload: z.ZodType;
    dispatch: { jobName: string; payload: z.ZodType; maxDeliveries: number };
    defaultJobOptions: Record<string, unknown>;
  }
>;
