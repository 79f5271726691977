import { type DeliveryJob, type DispatchJob, jobCatalog, withDeadline } from "@webhooks/core";
import { Job, Queue } from "bullmq";
import type { Wake } from "./gate/index.ts";
import { type QueueLayout, queueLayout, shardOf } from "./queue-layout.ts";
import type { RedisConnection } from "./redis.ts";

const catalog = jobCatalog.deliveries;

export interface ReconcilerState {
  /** Due deliveries up to this time (database clock) have been checked for a job. */
  watermark: Date;
  /** Where the rolling sweep over every due delivery goes on from. */
  sweep: { nextAttemptAt: Date; id: string } | undefined;
}
const ENQUEUE_TIMEOUT_MS = 2_000;

/**
 * A due delivery whose job is parked to run later than this from now, and not at the gate, is
 * late (see `inspect`). Jobs wait this long for other reasons: a delivery another worker holds
 * waits for its lease (a DELIVERY_TIMEOUT), and one that cannot reach PostgreSQL up to a minute.
 */
const LATE_JOB_MS = 2 * 60_000;

/**
 * How long a resend's note for an active job lasts. It matters for a job that has recorded its
 * attempt and is parking itself, which takes milliseconds; a note left for a job still
 * mid-attempt (the resend changed nothing then) only costs the worker one look at the delivery.
 */
const RESEND_NOTE_MS = 10 * 60_000;

/** The BullMQ queue of one shard; DeliveryQueue is all of them. */
type ShardQueue = Queue<DeliveryJob | DispatchJob, void, typeof catalog.jobName | typeof catalog.dispatch.jobName>;

/** A delivery to dispatch, with its subscription (see DeliveryJob.subscriptionId). */
export type DispatchEntry = DispatchJob["deliveries"][number];

/**
 * The producer side of the deliveries queue. A delivery's own job has the delivery's id, so adding
 * one that already has a job does nothing: the reconciler, a manual resend and the gate's wakes
 * can all call `enqueue` for the same delivery safely. A publish's new deliveries go in dispatch
 * jobs instead (`dispatch`), and get a job of their own only if they must come back later.
 *
 * With QUEUE_SHARDS > 1 the deliveries are spread over that many BullMQ queues (see
 * queue-layout.ts); a delivery's job is always in the queue of its shard, `shardOf(id)`, so every
 * method here finds it without asking Redis where it is.
 */
export class DeliveryQueue {
  /** The BullMQ queue of each shard, in shard order (Bull Board shows them). */
  readonly queues: ShardQueue[];
  readonly layout: QueueLayout;
  #lastErrorLog = 0;

  /** `layout` as a plain prefix: the single-node, single-queue layout. */
  constructor(
    private readonly redis: RedisConnection,
    layout: QueueLayout | string,
    logger?: { warn(details: object, message: string): void },
  ) {
    this.layout = typeof layout === "string" ? queueLayout(layout) : layout;
    this.queues = this.layout.shardPrefixes.map((prefix) => {
      const queue: ShardQueue = new Queue(catalog.queueName, {
        connection: redis,
        prefix,
        defaultJobOptions: catalog.defaultJobOptions,
      });
      // Without a listener BullMQ prints every connection error; log them, at most every 10 s.
      queue.on("error", (error) => {
        if (Date.now() - this.#lastErrorLog < 10_000) return;
        this.#lastErrorLog = Date.now();
        logger?.warn({ err: error }, "deliveries queue: Redis error");
      });
      return queue;
    });
  }

  /** Whether the connection to Redis is up (it may still be slow: callers that must answer put a deadline on their calls). */
  get connected(): boolean {
    return this.redis.status === "ready";
  }

  /** The only queue, when there is one shard (the default). */
  get queue(): ShardQueue {
    const [only] = this.queues;
    if (this.queues.length !== 1 || !only)
      throw new Error("the deliveries queue has several shards: use queueOf(deliveryId)");
    return only;
  }

  /** The queue of the delivery's shard. */
  queueOf(deliveryId: string): ShardQueue {
    return this.queues[shardOf(deliveryId, this.queues.length)]!;
  }

  /** `subscriptionOf`, when the caller knows it, goes into each job (see the job catalog). */
  async enqueue(deliveryIds: string[], subscriptionOf?: ReadonlyMap<string, string>): Promise<void> {
    if (deliveryIds.length === 0) return;
    const data = (deliveryId: string): DeliveryJob => {
      const subscriptionId = subscriptionOf?.get(deliveryId);
      return subscriptionId === undefined ? { deliveryId } : { deliveryId, subscriptionId };
    };
    // addBulk builds a MULTI pipeline; for the common single job a plain add is cheaper.
    const [only] = deliveryIds;
    if (deliveryIds.length === 1 && only !== undefined) {
      await this.#failFast(() => this.queueOf(only).add(catalog.jobName, data(only), { jobId: only }));
      return;
    }
    // One MULTI per shard: on a cluster a transaction cannot span slots.
    await this.#failFast(() =>
      Promise.all(
        [...this.#byShard(deliveryIds)].map(([shard, ids]) =>
          this.queues[shard]!.addBulk(
            ids.map((deliveryId) => ({ name: catalog.jobName, data: data(deliveryId), opts: { jobId: deliveryId } })),
          ),
        ),
      ),
    );
  }

  /**
   * A publish's new deliveries, as dispatch jobs of up to `maxDeliveries` (see the job catalog).
   * Each shard keeps which dispatch holds each of its deliveries until the worker is done with
   * it (`dispatching`), so that the reconciler does not take them for lost (`inspect`). That is
   * written first: a dispatch a worker could end before it would leave it behind for good.
   */
  async dispatch(deliveries: DispatchEntry[]): Promise<void> {
    if (deliveries.length === 0) return;
    const max = catalog.dispatch.maxDeliveries;
    await this.#failFast(() =>
      Promise.all(
        [...this.#byShard(deliveries, (entry) => entry.deliveryId)].map(async ([shard, entries]) => {
          const queue = this.queues[shard]!;
          const jobs = [];
          const members: string[] = [];
          for (let i = 0; i < entries.length; i += max) {
            const chunk = entries.slice(i, i + max);
            const jobId = dispatchJobId(chunk[0]!.deliveryId);
            for (const entry of chunk) members.push(entry.deliveryId, jobId);
            jobs.push({ name: catalog.dispatch.jobName, data: { deliveries: chunk }, opts: { jobId } });
          }
          // Both on the queue's one connection, the index sent first: Redis runs them in that order,
          // and the publish waits for one round trip instead of two.
          const indexed = this.redis.hset(dispatchingKey(queue), ...members);
          const added =
            jobs.length === 1 ? queue.add(jobs[0]!.name, jobs[0]!.data, jobs[0]!.opts) : queue.addBulk(jobs);
          await Promise.all([indexed, added]);
        }),
      ),
    );
  }

  /** The worker is done with these deliveries of a dispatch: each has ended, or has a job of its own. */
  async dispatched(deliveryIds: string[]): Promise<void> {
    if (deliveryIds.length === 0) return;
    await Promise.all(
      [...this.#byShard(deliveryIds)].map(([shard, ids]) =>
        this.redis.hdel(dispatchingKey(this.queues[shard]!), ...ids),
      ),
    );
  }

  /**
   * Gives a delivery of a dispatch a job of its own, to run at `at` (its retry, its turn at the
   * gate). If it has one already (a resend or a wake made it meanwhile), that one stands: it
   * runs first, and parks itself as the delivery's state then says.
   */
  async schedule(job: DeliveryJob, at: number): Promise<void> {
    await this.queueOf(job.deliveryId).add(catalog.jobName, job, {
      jobId: job.deliveryId,
      delay: Math.max(0, at - Date.now()),
    });
  }

  /** The items grouped by the shard of their delivery (by default, the item is the delivery's id). */
  #byShard<T = string>(items: T[], deliveryIdOf: (item: T) => string = (item) => item as string): Map<number, T[]> {
    const groups = new Map<number, T[]>();
    for (const item of items) {
      const shard = shardOf(deliveryIdOf(item), this.queues.length);
      const group = groups.get(shard);
      if (group) group.push(item);
      else groups.set(shard, [item]);
    }
    return groups;
  }

  /**
   * The job of a delivery just resent (manual resend, or recover): run it now. One waiting for
   * its retry has a delayed job, which is promoted; otherwise a job is added (a waiting job runs
   * soon anyway, and a finished one has already left Redis).
   *
   * An active job cannot be promoted. It is ending an attempt that began before the resend (its
   * record came first: the resend leaves a delivery being attempted to that attempt), and it may
   * be about to park itself until the next retry, hours away. So the resend leaves a note, which
   * the worker reads once it has parked the job (`takeResendNote`), and looks once more in case
   * the job parked itself before the note was there. A job that finishes instead leaves the
   * delivery due and without a job, for the reconciler's next pass.
   */
  async enqueueResend(deliveryId: string): Promise<void> {
    const job = await this.#failFast(() => this.queueOf(deliveryId).getJob(deliveryId));
    if (job && (await job.isActive())) {
      await this.redis.set(this.#resendNoteKey(deliveryId), "1", "PX", RESEND_NOTE_MS);
      if (await job.isDelayed()) await promoteStill(job);
      return;
    }
    if (job && (await job.isDelayed())) {
      await promoteStill(job);
      return;
    }
    await this.enqueue([deliveryId]);
  }

  /** Whether a resend left a note for this delivery's job while it was active (see `enqueueResend`); the note goes. */
  async takeResendNote(deliveryId: string): Promise<boolean> {
    return (await this.redis.getdel(this.#resendNoteKey(deliveryId))) !== null;
  }

  /** Beside the job's own keys, so that on a cluster it is on the job's slot. */
  #resendNoteKey(deliveryId: string): string {
    return `${this.queueOf(deliveryId).toKey(deliveryId)}:resent`;
  }

  /**
   * Runs each parked delivery's job at its time (the gate's wakes): a delayed job is promoted or
   * re-timed; a job that is missing is added. A job that is active right now is left alone: it is
   * the one parking itself, and it looks for its turn once parked (see the worker).
   *
   * A wake is the hand-off of a turn at the gate, on the path from one attempt's end to the next
   * one's start, so the common case (the job is delayed) costs one call: the job is promoted (or
   * re-timed) by id, without reading it first. Only if it was not delayed is it added, which does
   * nothing to a job that exists (active, waiting, or promoted by another waker meanwhile).
   */
  async wake(wakes: Wake[]): Promise<void> {
    await Promise.all(wakes.map((wake) => this.#wakeOne(wake)));
  }

  async #wakeOne({ deliveryId, at }: Wake): Promise<void> {
    const delay = Math.max(0, at - Date.now());
    const queue = this.queueOf(deliveryId);
    const data: DeliveryJob = { deliveryId, waited: true };
    const job = new Job<DeliveryJob | DispatchJob>(queue, catalog.jobName, data, {}, deliveryId);
    try {
      if (delay === 0) await job.promote();
      else await job.changeDelay(delay);
    } catch {
      // Not delayed: missing (added now), or active or waiting already (the add leaves it alone).
      await queue.add(catalog.jobName, data, { jobId: deliveryId, delay });
    }
  }

  /**
   * A request must not wait on a Redis that is down: BullMQ would wait for the connection
   * forever. The caller has committed to PostgreSQL already and the reconciler will enqueue.
   */
  async #failFast<T>(operation: () => Promise<T>): Promise<T> {
    if (!this.connected) throw new Error(`Redis is not connected (${this.redis.status})`);
    return withDeadline(operation(), ENQUEUE_TIMEOUT_MS, "Redis");
  }

  /** The deliveries among these that have no job in Redis at all. */
  async withoutJob(deliveryIds: string[]): Promise<string[]> {
    return (await this.inspect(deliveryIds)).missing;
  }

  /**
   * What Redis holds for each of these deliveries, which PostgreSQL says are due now: `missing`
   * have no job at all; `late` have a job parked (delayed) to run more than LATE_JOB_MS from now,
   * and not for a turn at the gate (such a job says `waited` in its data). A due delivery's job is
   * late when the call that should have brought it forward failed: a resend or recover of a
   * delivery waiting for its retry, made while Redis was down or slow, committed its new time in
   * PostgreSQL and left the job at the retry's, hours away. When it runs is read from BullMQ's
   * delayed set, whose score is the time in ms times 0x1000 (plus a counter).
   */
  async inspect(deliveryIds: string[], now = Date.now()): Promise<{ missing: string[]; late: string[] }> {
    if (deliveryIds.length === 0) return { missing: [], late: [] };
    // One pipeline per shard: on a cluster a pipeline's keys must share a slot (a job's keys and
    // its queue's delayed set do).
    const missing = new Set<string>();
    const late = new Set<string>();
    await Promise.all(
      [...this.#byShard(deliveryIds)].map(async ([shard, ids]) => {
        const queue = this.queues[shard]!;
        const pipeline = this.redis.pipeline();
        for (const id of ids)
          pipeline.hget(queue.toKey(id), "data").zscore(queue.keys.delayed!, id).hget(dispatchingKey(queue), id);
        const replies = (await pipeline.exec()) ?? [];
        const inDispatch = new Map<string, string>();
        ids.forEach((id, index) => {
          const reply = (k: number): string | null => {
            const [error, value] = replies[3 * index + k] ?? [null, null];
            if (error) throw error;
            return (value as string | null) ?? null;
          };
          const [data, score, dispatchId] = [reply(0), reply(1), reply(2)];
          if (data === null) {
            if (dispatchId === null) missing.add(id);
            else inDispatch.set(id, dispatchId);
          } else if (score !== null && Math.floor(Number(score) / 0x1000) > now + LATE_JOB_MS && !parkedAtGate(data))
            late.add(id);
        });
        // A delivery whose dispatch is gone (dropped after BullMQ's own retries) is missing.
        for (const id of await this.#dropOrphans(queue, inDispatch)) missing.add(id);
      }),
    );
    return { missing: deliveryIds.filter((id) => missing.has(id)), late: deliveryIds.filter((id) => late.has(id)) };
  }

  /** Runs each of these deliveries' delayed jobs now (see `inspect`); one that left the delayed state meanwhile is left alone. */
  async promote(deliveryIds: string[]): Promise<void> {
    await Promise.all(
      deliveryIds.map(async (id) => {
        const job = await this.queueOf(id).getJob(id);
        if (job && (await job.isDelayed())) await promoteStill(job);
      }),
    );
  }

  /**
   * Where the reconciler left off, kept in Redis on purpose: if Redis loses its data, this goes
   * with the jobs, and the next pass knows to check everything. So does a change of the number
   * of shards: deliveries move to other queues, and the full pass enqueues each in its new one.
   *
   * On a Redis Cluster the shards' queues are on other nodes than this state, and one node can
   * lose its data alone (a master restarted empty). So each shard also keeps a mark in its own
   * slot: a shard whose mark is gone lost its jobs, and the pass checks everything too.
   *
   * Redis can also lose its data in the middle of a pass, after the state was read: the jobs the
   * pass did not look at again are gone, and a watermark saved at its end would keep the next
   * pass from looking for them (only the rolling sweep would, a slice per pass). So a pass
   * begins by writing a token of its own into every mark, and saveReconcilerState keeps the new
   * state only if every mark still holds that token when it is written. A pass that found a mark
   * missing removes the state at once, so that if it fails before the end, the next is full too.
   */
  async beginReconcilerPass(): Promise<{ state: ReconcilerState | undefined; token: string }> {
    const token = `${Date.now()}:${Math.random().toString(36).slice(2)}`;
    // SET ... GET: the mark as it was, and this pass's token in its place, in one command.
    const previous = await Promise.all(
      this.queues.map((_, shard) => this.redis.set(this.#reconciledMarkKey(shard), token, "GET")),
    );
    if (previous.some((mark) => mark === null)) {
      await this.redis.del(this.#reconcilerKey);
      return { state: undefined, token };
    }
    const fields = await this.redis.hgetall(this.#reconcilerKey);
    if (!fields.watermark || Number(fields.shards ?? 1) !== this.queues.length) return { state: undefined, token };
    return {
      state: {
        watermark: new Date(Number(fields.watermark)),
        sweep:
          fields.sweep_at && fields.sweep_id
            ? { nextAttemptAt: new Date(Number(fields.sweep_at)), id: fields.sweep_id }
            : undefined,
      },
      token,
    };
  }

  /**
   * Saves where the pass begun with `token` left off. False, and no state kept, when a shard's
   * mark no longer holds the token: Redis lost data during the pass, and the next pass is full.
   * The marks are checked after the state is written, so a loss at any moment before the check
   * is seen; one after it removes the marks, which the next pass finds missing.
   */
  async saveReconcilerState(state: ReconcilerState, token: string): Promise<boolean> {
    await this.redis
      .multi()
      .del(this.#reconcilerKey)
      .hset(this.#reconcilerKey, {
        watermark: state.watermark.getTime(),
        shards: this.queues.length,
        ...(state.sweep ? { sweep_at: state.sweep.nextAttemptAt.getTime(), sweep_id: state.sweep.id } : {}),
      })
      .exec();
    const marks = await Promise.all(this.queues.map((_, shard) => this.redis.get(this.#reconciledMarkKey(shard))));
    if (marks.every((mark) => mark === token)) return true;
    await this.redis.del(this.#reconcilerKey);
    return false;
  }

  get #reconcilerKey(): string {
    return this.layout.reconcilerKey;
  }

  /** A key in the shard's own slot (beside its queue's keys), there as long as the shard's data is. */
  #reconciledMarkKey(shard: number): string {
    return `${this.layout.shardPrefixes[shard]}:${catalog.queueName}:reconciled`;
  }

  /**
   * Removes what dropped dispatches left behind, from a random sample of each shard's index of
   * dispatched deliveries: a dispatch BullMQ dropped (it stalled twice, or failed five times)
   * never lets go of its deliveries. The due ones among them are found by `inspect` all the same;
   * the others (delivered meanwhile, or waiting for a retry) would stay in the index for good.
   * Returns how many entries went.
   */
  async dropOrphanedDispatching(sample: number): Promise<number> {
    let dropped = 0;
    for (const queue of this.queues) {
      const fields = (await this.redis.hrandfield(dispatchingKey(queue), sample, "WITHVALUES")) as string[];
      const inDispatch = new Map<string, string>();
      for (let i = 0; i + 1 < fields.length; i += 2) inDispatch.set(fields[i]!, fields[i + 1]!);
      dropped += (await this.#dropOrphans(queue, inDispatch)).length;
    }
    return dropped;
  }

  /**
   * Of these deliveries (id -> the dispatch the shard's index says holds it), those whose
   * dispatch has left Redis; their entries go from the index. One EXISTS per dispatch. (An entry
   * written a moment before its dispatch, as the API writes them, may be taken for an orphan: its
   * delivery then also gets a job of its own, which finds it done or leased.)
   */
  async #dropOrphans(queue: ShardQueue, inDispatch: ReadonlyMap<string, string>): Promise<string[]> {
    const byDispatch = new Map<string, string[]>();
    for (const [deliveryId, dispatchId] of inDispatch) {
      const members = byDispatch.get(dispatchId);
      if (members) members.push(deliveryId);
      else byDispatch.set(dispatchId, [deliveryId]);
    }
    if (byDispatch.size === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const dispatchId of byDispatch.keys()) pipeline.exists(queue.toKey(dispatchId));
    const replies = (await pipeline.exec()) ?? [];
    const orphans = [...byDispatch.values()].flatMap((members, index) => {
      const [error, count] = replies[index] ?? [null, 1];
      if (error) throw error;
      return count === 0 ? members : [];
    });
    if (orphans.length > 0) await this.redis.hdel(dispatchingKey(queue), ...orphans);
    return orphans;
  }

  /** New deliveries that dispatch jobs hold and no worker is done with yet, over the shards (see `dispatch`). */
  async dispatching(): Promise<number> {
    const counts = await Promise.all(this.queues.map((queue) => this.redis.hlen(dispatchingKey(queue))));
    return counts.reduce((sum, count) => sum + count, 0);
  }

  /** Jobs by state, summed over the shards, for the queue-depth metric. */
  async depth(): Promise<Record<string, number>> {
    const total: Record<string, number> = {};
    for (const counts of await Promise.all(
      this.queues.map((queue) => queue.getJobCounts("waiting", "active", "delayed", "prioritized", "failed")),
    )) {
      for (const [state, count] of Object.entries(counts)) total[state] = (total[state] ?? 0) + count;
    }
    return total;
  }

  async close(): Promise<void> {
    await Promise.all(this.queues.map((queue) => queue.close()));
  }
}

/** The id of the dispatch job whose first delivery this is (BullMQ's custom ids cannot contain ':'). */
export function dispatchJobId(firstDeliveryId: string): string {
  return `dispatch_${firstDeliveryId}`;
}

/** Which dispatch job holds each delivery a worker has not yet done with (see DeliveryQueue.dispatch), beside the shard's queue keys. */
function dispatchingKey(queue: ShardQueue): string {
  return `${queue.qualifiedName}:dispatching`;
}

/** Whether a job's data says it is parked for its turn at the gate (see the worker), when it is due and delayed on purpose. */
function parkedAtGate(data: string): boolean {
  try {
    return (JSON.parse(data) as { waited?: unknown }).waited === true;
  } catch {
    return false;
  }
}

/** Promotes a delayed job, unless it left the delayed state meanwhile (promoted by another caller, or started). */
export async function promoteStill(job: { promote(): Promise<void>; isDelayed(): Promise<boolean> }): Promise<void> {
  try {
    await job.promote();
  } catch (error) {
    if (await job.isDelayed()) throw error;
  }
}
