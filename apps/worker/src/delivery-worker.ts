import { type DeliveryJob, type DispatchJob, jobCatalog } from "@webhooks/core";
import { isDatabaseUnreachable } from "@webhooks/db";
import type { RedisConnection } from "@webhooks/queue";
import { DelayedError, type Job, UnrecoverableError, Worker } from "bullmq";
import { type AttemptDeps, deliverAttempt, type NextStep } from "./deliver-attempt.ts";
import { applyNextStep, type DeliveryJobHandle, sameJobData } from "./next-step.ts";

const catalog = jobCatalog.deliveries;

/** A delivery of a dispatch whose attempt failed with an error of ours runs again in its own job after this. */
const DISPATCHED_RETRY_MS = 1_000;

export interface DeliveryWorkerOptions {
  connection: RedisConnection;
  /** The BullMQ prefix of the queue (of the shard) it consumes. */
  prefix: string;
  /** Jobs at once, for this worker (the process's attempts at once are `deps.state.attempts`). */
  concurrency: number;
  /** How long a job stays locked to its worker without a renewal (BullMQ lockDuration). */
  lockMs: number;
}

/**
 * A process's WORKER_CONCURRENCY split over the shards it consumes (one BullMQ worker each), so
 * that it still bounds the process's attempts at once (its sockets, memory, database batches).
 * The hash spreads deliveries evenly, so each shard gets an even share; every shard gets at
 * least one slot, so with fewer slots than shards the process runs one per shard.
 */
export function shardConcurrency(concurrency: number, shards: number, shard: number): number {
  return Math.max(1, Math.floor(concurrency / shards) + (shard < concurrency % shards ? 1 : 0));
}

/**
 * The BullMQ worker. Its handler is thin: validate the payload, make one attempt, and apply what
 * comes after it (next-step.ts). A receiver's failure is therefore never a BullMQ failure;
 * BullMQ's own retries are left for our failures (e.g. PostgreSQL unreachable).
 */
export function createDeliveryWorker(
  deps: AttemptDeps,
  options: DeliveryWorkerOptions,
): Worker<DeliveryJob | DispatchJob> {
  const worker = new Worker<DeliveryJob | DispatchJob>(
    catalog.queueName,
    async (job: Job<DeliveryJob | DispatchJob>, token?: string) => {
      if (job.name === catalog.dispatch.jobName) return runDispatch(deps, job);
      const payload = catalog.payload.safeParse(job.data);
      if (!payload.success) throw new UnrecoverableError(`invalid job payload: ${payload.error.message}`);
      // Parked (delayed) by moving the job itself; BullMQ then needs the DelayedError.
      const handle: DeliveryJobHandle = {
        job: payload.data,
        ownJob: true,
        async park(at, data = payload.data) {
          if (!sameJobData(data, payload.data)) await job.updateData(data);
          await job.moveToDelayed(at, token);
        },
      };
      if (await attemptAndApply(deps, handle)) throw new DelayedError();
    },
    {
      connection: options.connection,
      prefix: options.prefix,
      concurrency: options.concurrency,
      lockDuration: options.lockMs,
      stalledInterval: options.lockMs,
      autorun: false,
    },
  );
  worker.on("failed", (job, error) => {
    deps.metrics.jobErrors.inc();
    deps.logger.error({ err: error, jobId: job?.id, attemptsMade: job?.attemptsMade }, "delivery job failed");
  });
  // A job whose lock could not be renewed is no longer this worker's: it was parked or rescheduled
  // a moment earlier (its lock went with it), or another worker took it over after a stall (the
  // delivery's lease still keeps the two from sending it at once). BullMQ reports it twice: here,
  // and as an `error`, which is skipped below.
  worker.on("lockRenewalFailed", (jobIds) => {
    deps.logger.warn(
      { jobIds },
      "could not renew the lock of jobs that left this worker (parked, rescheduled or taken over after a stall)",
    );
  });
  // While Redis is unreachable this fires on every reconnection attempt: log it every 10 s at most.
  let lastErrorLog = 0;
  worker.on("error", (error) => {
    if (error.message.startsWith("could not renew lock for job")) return;
    if (Date.now() - lastErrorLog < 10_000) return;
    lastErrorLog = Date.now();
    const unreachable = isConnectionError(error);
    deps.logger.error({ err: error }, unreachable ? "worker error: Redis is unreachable" : "worker error");
  });
  return worker;
}

/**
 * One attempt of the delivery, within the process's attempt slots, then what comes after it.
 * PostgreSQL out of reach is not the delivery's failure: it is parked, spending none of BullMQ's
 * attempts (which would run out within seconds and drop it), and runs again once PostgreSQL may
 * be back. Returns whether it was parked.
 */
async function attemptAndApply(deps: AttemptDeps, handle: DeliveryJobHandle): Promise<boolean> {
  let next: NextStep;
  try {
    next = await deps.state.attempts.run(() => deliverAttempt(deps, handle.job), { turn: handle.job.waited === true });
  } catch (error) {
    if (!isDatabaseUnreachable(error)) throw error;
    await handle.park(Date.now() + deps.state.databaseOutage.parkFor(deps.logger));
    return true;
  }
  return applyNextStep(deps, handle, next);
}

/**
 * A dispatch job: its deliveries are attempted at once, within the process's attempts, as if each
 * had its own job; one that must come back later (a retry, a turn at the gate, PostgreSQL out of
 * reach, a failure of ours) gets a job of its own then. Once every one has, or has ended, the
 * dispatch lets go of them (DeliveryQueue.dispatched) and finishes. If this fails midway (Redis
 * could not take a delivery's job), or the process dies, BullMQ runs the dispatch again: the
 * deliveries done already are not claimed again, and one in flight elsewhere is leased.
 */
async function runDispatch(deps: AttemptDeps, job: Job<DeliveryJob | DispatchJob>): Promise<void> {
  const payload = catalog.dispatch.payload.safeParse(job.data);
  if (!payload.success) throw new UnrecoverableError(`invalid dispatch payload: ${payload.error.message}`);
  const { deliveries } = payload.data;
  const settled = await Promise.allSettled(deliveries.map((entry) => runDispatched(deps, entry)));
  const failed = settled.find((outcome) => outcome.status === "rejected");
  if (failed) throw failed.reason;
  await deps.queue.dispatched(deliveries.map((entry) => entry.deliveryId));
}

async function runDispatched(deps: AttemptDeps, entry: DispatchJob["deliveries"][number]): Promise<void> {
  const job: DeliveryJob =
    entry.subscriptionId === undefined
      ? { deliveryId: entry.deliveryId }
      : { deliveryId: entry.deliveryId, subscriptionId: entry.subscriptionId };
  // Parked by giving the delivery a job of its own, delayed until then.
  const handle: DeliveryJobHandle = {
    job,
    ownJob: false,
    park: (at, data) => deps.queue.schedule(data ?? job, at),
  };
  try {
    await attemptAndApply(deps, handle);
  } catch (error) {
    // Its own job is retried as any job is (the job catalog's attempts and back-off).
    deps.metrics.jobErrors.inc();
    deps.logger.error(
      { err: error, deliveryId: job.deliveryId },
      "delivery of a dispatch failed; it is tried again in a job of its own",
    );
    await handle.park(Date.now() + DISPATCHED_RETRY_MS);
  }
}

/** Errors ioredis and Node give when the connection to Redis is down or cannot be made. */
function isConnectionError(error: Error & { code?: string }): boolean {
  return (
    ["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "ENOTFOUND", "EAI_AGAIN", "EPIPE", "EHOSTUNREACH"].includes(
      error.code ?? "",
    ) || /Connection is closed|connect ETIMEDOUT|Stream isn't writeable|MaxRetriesPerRequest/i.test(error.message)
  );
}
