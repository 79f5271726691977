import { type DeliveryJob, type DispatchJob, jobCatalog } from "@webhooks/core";
import { isDatabaseUnreachable, whyNotClaimed } from "@webhooks/db";
import { promoteStill, type RedisConnection } from "@webhooks/queue";
import { DelayedError, type Job, UnrecoverableError, Worker } from "bullmq";
import pLimit, { type LimitFunction } from "p-limit";
import { type AttemptDeps, deliverAttempt, type NextStep } from "./deliver-attempt.ts";

const catalog = jobCatalog.deliveries;

/**
 * A parked delivery is woken by the gate when its turn comes, and if that wake is lost, by the
 * reconciler once the turn lapses (see the gate). This timer is only the last resort, should
 * both fail. A job whose timer fired while it was still in line is parked again for longer:
 * every waiting delivery's timer fires, so a line of N deliveries costs N / fallback job runs per
 * second (a million behind a circuit open for a day: ~280/s at an hour, ~1,100/s at 15 minutes),
 * and the timers of deliveries that began to wait together are spread by a fifth either way.
 */
const PARKED_FALLBACK_MS = 15 * 60_000;
const STILL_IN_LINE_FALLBACK_MS = 60 * 60_000;

/** A parked delivery's job data: marked, and naming its subscription, so that its next run is pre-checked before any claim. */
function parkedData(job: DeliveryJob, next: Extract<NextStep, { kind: "parked" }>): DeliveryJob {
  return { ...job, subscriptionId: next.subscriptionId, waited: true, ...(next.test === true ? { test: true } : {}) };
}

function fallbackAt(stillInLine: boolean): number {
  const base = stillInLine ? STILL_IN_LINE_FALLBACK_MS : PARKED_FALLBACK_MS;
  return Date.now() + Math.round(base * (0.8 + Math.random() * 0.4));
}

export interface DeliveryWorkerOptions {
  connection: RedisConnection;
  /**
   * The process's attempts at once (WORKER_CONCURRENCY), shared by its BullMQ workers: a
   * dispatch job carries several deliveries, so the jobs a worker runs do not bound them.
   * Default: `concurrency` for this worker alone.
   */
  attempts?: LimitFunction;
  /** The BullMQ prefix of the queue (of the shard) it consumes. */
  prefix: string;
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
 * The BullMQ worker. Its handler is thin: validate the payload, make one attempt, and if the
 * delivery needs another one later, park the job as delayed until then. A receiver's failure is
 * therefore never a BullMQ failure; BullMQ's own retries are left for our failures (e.g.
 * PostgreSQL unreachable).
 */
export function createDeliveryWorker(
  deps: AttemptDeps,
  options: DeliveryWorkerOptions,
): Worker<DeliveryJob | DispatchJob> {
  const attempts = options.attempts ?? pLimit(options.concurrency);
  const worker = new Worker<DeliveryJob | DispatchJob>(
    catalog.queueName,
    async (job: Job<DeliveryJob | DispatchJob>, token?: string) => {
      if (job.name === catalog.dispatch.jobName) return runDispatch(deps, attempts, job);
      const payload = catalog.payload.safeParse(job.data);
      if (!payload.success) throw new UnrecoverableError(`invalid job payload: ${payload.error.message}`);
      const deliveryId = payload.data.deliveryId;
      let next: NextStep;
      try {
        next = await attempts(() => deliverAttempt(deps, payload.data));
      } catch (error) {
        if (!isDatabaseUnreachable(error)) throw error;
        // Not this job's failure: parked, it spends none of BullMQ's attempts (which would run out
        // within seconds and drop it), and runs again once PostgreSQL may be back.
        await job.moveToDelayed(Date.now() + databaseOutage.parkFor(deps.logger), token);
        throw new DelayedError();
      }
      if (next.kind === "wait") {
        // Parked for its retry (or its lease), not for a turn at the gate: its data must not say
        // `waited` any more, or a resend that cannot reach Redis would leave it late for good (the
        // reconciler brings forward only late jobs not waiting at the gate; DeliveryQueue.inspect).
        if (payload.data.waited === true) {
          const { waited: _, ...data } = payload.data;
          await job.updateData(data);
        }
        await job.moveToDelayed(Date.now() + next.delayMs, token);
        await runIfResent(deps, job, deliveryId);
        throw new DelayedError();
      }
      if (next.kind === "parked") {
        // Out of the worker slot until its turn: a waiting delivery holds no slot.
        const parkedUntil = next.turnAt ?? fallbackAt(next.stillInLine);
        // Marked, and naming its subscription, so that its next run is pre-checked before any claim.
        if (
          payload.data.waited !== true ||
          payload.data.subscriptionId === undefined ||
          (next.test === true && payload.data.test !== true)
        ) {
          await job.updateData(parkedData(payload.data, next));
        }
        await job.moveToDelayed(parkedUntil, token);
        // Its turn may have come while this job was still active, when the waker could not move
        // it: look once it is parked, and wake it if so.
        const turn = await deps.gate.turnOf(next.subscriptionId, deliveryId);
        if (turn !== null && turn < parkedUntil) await deps.queue.wake([{ deliveryId, at: turn }]);
        throw new DelayedError();
      }
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
 * While PostgreSQL cannot be reached (down, restarting, failing over), every job fails at its
 * claim. Each is parked instead, for as long as the outage has lasted so far (at least a second,
 * at most a minute, a fifth either way): a short outage costs its jobs a second or two, and a long
 * one does not make the worker take every job of a backlog again every second. The outage is over
 * once no job has met it for half as long again as the last park (at least 10 s): a job parked
 * meanwhile would have come back and met it. One line is logged every 10 s, not one per job.
 */
export function outageBackoff(random: () => number = Math.random) {
  let since = 0;
  let lastSeen = Number.NEGATIVE_INFINITY;
  let lastParkMs = 0;
  let lastLog = Number.NEGATIVE_INFINITY;
  return {
    /** How long to park a job that just met the outage (ms); logs a line at most every 10 s. */
    parkFor(logger: Pick<AttemptDeps["logger"], "warn">, now = Date.now()): number {
      if (now - lastSeen > Math.max(10_000, lastParkMs * 1.5)) since = now;
      lastSeen = now;
      if (now - lastLog >= 10_000) {
        lastLog = now;
        logger.warn({ outageMs: now - since }, "PostgreSQL is unreachable: jobs are parked until it is back");
      }
      const base = Math.min(60_000, Math.max(1_000, now - since));
      lastParkMs = Math.round(base * (0.8 + random() * 0.4));
      return lastParkMs;
    },
  };
}
const databaseOutage = outageBackoff();

/**
 * A dispatch job: its deliveries are attempted at once, within the process's attempts, as if each
 * had its own job; one that must come back later (a retry, a turn at the gate, PostgreSQL out of
 * reach, a failure of ours) gets a job of its own then. Once every one has, or has ended, the
 * dispatch lets go of them (DeliveryQueue.dispatched) and finishes. If this fails midway (Redis
 * could not take a delivery's job), or the process dies, BullMQ runs the dispatch again: the
 * deliveries done already are not claimed again, and one in flight elsewhere is leased.
 */
async function runDispatch(
  deps: AttemptDeps,
  attempts: LimitFunction,
  job: Job<DeliveryJob | DispatchJob>,
): Promise<void> {
  const payload = catalog.dispatch.payload.safeParse(job.data);
  if (!payload.success) throw new UnrecoverableError(`invalid dispatch payload: ${payload.error.message}`);
  const { deliveries } = payload.data;
  const settled = await Promise.allSettled(deliveries.map((entry) => runDispatched(deps, attempts, entry)));
  const failed = settled.find((outcome) => outcome.status === "rejected");
  if (failed) throw failed.reason;
  await deps.queue.dispatched(deliveries.map((entry) => entry.deliveryId));
}

async function runDispatched(
  deps: AttemptDeps,
  attempts: LimitFunction,
  entry: DispatchJob["deliveries"][number],
): Promise<void> {
  const job: DeliveryJob =
    entry.subscriptionId === undefined
      ? { deliveryId: entry.deliveryId }
      : { deliveryId: entry.deliveryId, subscriptionId: entry.subscriptionId };
  let next: NextStep;
  try {
    next = await attempts(() => deliverAttempt(deps, job));
  } catch (error) {
    if (isDatabaseUnreachable(error)) {
      await deps.queue.schedule(job, Date.now() + databaseOutage.parkFor(deps.logger));
      return;
    }
    // Its own job is retried as any job is (the job catalog's attempts and back-off).
    deps.metrics.jobErrors.inc();
    deps.logger.error(
      { err: error, deliveryId: job.deliveryId },
      "delivery of a dispatch failed; it is tried again in a job of its own",
    );
    await deps.queue.schedule(job, Date.now() + DISPATCHED_RETRY_MS);
    return;
  }
  if (next.kind === "done") return;
  if (next.kind === "wait") {
    await deps.queue.schedule(job, Date.now() + next.delayMs);
    return;
  }
  const parkedUntil = next.turnAt ?? fallbackAt(next.stillInLine);
  await deps.queue.schedule(parkedData(job, next), parkedUntil);
  // Its turn may have come while it was being parked. And if the gate does not know it at all,
  // Redis lost its data between the line and this job (which it would have taken too, were it
  // older): nobody would wake it before its fallback timer, minutes away, so it runs now, and
  // joins the line again if it must wait.
  const place = await deps.gate.placeOf(next.subscriptionId, job.deliveryId);
  const at = place.turn ?? (place.inLine ? null : Date.now());
  if (at !== null && at < parkedUntil) await deps.queue.wake([{ deliveryId: job.deliveryId, at }]);
}

/** A delivery of a dispatch whose attempt failed with an error of ours runs again in its own job after this. */
const DISPATCHED_RETRY_MS = 1_000;

/**
 * A manual resend that came while this job was ending its attempt could not promote the job, then
 * active, and left a note (DeliveryQueue.enqueueResend). If the delivery is due now, the resend
 * came after this attempt's record, and the job just parked until the next retry runs now
 * instead. If not, the attempt began after the resend and was its attempt: the retry's time stands.
 * Never thrown: the job is parked already, and a failure here only leaves it at the retry's time.
 */
async function runIfResent(deps: AttemptDeps, job: Job<DeliveryJob | DispatchJob>, deliveryId: string): Promise<void> {
  try {
    if (!(await deps.queue.takeResendNote(deliveryId))) return;
    const why = await whyNotClaimed({ sql: deps.sql }, deliveryId);
    if (why.reason !== "not_due" || why.retryInMs > 0) return;
    // The API's own second look may have promoted it already.
    await promoteStill(job);
  } catch (error) {
    deps.logger.warn(
      { err: error, deliveryId },
      "could not run a resent delivery at once; it runs at its retry's time",
    );
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
