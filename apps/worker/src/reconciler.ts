import type { Logger } from "@webhooks/core";
import {
  type DueCursor,
  databaseNow,
  findDueDeliveries,
  lineHeads,
  type SqlClient,
  stillDue,
  withReconcilerLock,
} from "@webhooks/db";
import type { DeliveryGate, DeliveryQueue } from "@webhooks/queue";
import type { WorkerMetrics } from "./metrics.ts";

const BATCH = 500;
/** A job due this recently is probably about to run; leave it to the queue. */
const GRACE_MS = 1_000;
/**
 * A delivery is written with next_attempt_at = now() of its transaction, and becomes visible at
 * commit, a moment later: each pass looks this far behind its watermark so none slips past.
 */
const WATERMARK_OVERLAP_MS = 60_000;
/** Deliveries the rolling sweep checks per pass, for jobs lost other than with all of Redis. */
const SWEEP_PER_PASS = 1_000;
/**
 * A delivery that came due this recently and has no job yet may still be on its way: the API
 * enqueues a big fan-out's deliveries after its commit, 1,000 at a time, which on a loaded machine
 * can take longer than the grace. Such deliveries are enqueued all the same (a job id is the
 * delivery id, so the API's own add that follows does nothing), but they are not reported as lost
 * jobs.
 */
const JUST_DUE_MS = 30_000;
/** Entries of the index of dispatched deliveries a pass looks at, per shard, for what dropped dispatches left. */
const ORPHAN_SAMPLE = 200;

export interface ReconcilePass {
  /** Due deliveries looked at. */
  scanned: number;
  /** Those that had no job, now enqueued. */
  enqueued: number;
  /** Of those, the ones that came due within JUST_DUE_MS: probably on their way from the API, not lost. */
  justDue: number;
  /** Due deliveries whose job was parked far later than their time, and not at the gate: run now. */
  promoted: number;
  /** Heads of ordered lines looked at (each pass looks at every line's). */
  lineHeads: number;
  /** Whether it checked every due delivery (the first pass, or after Redis lost its data). */
  full: boolean;
  /** Entries of dropped dispatches removed from the index of dispatched deliveries (DeliveryQueue.dropOrphanedDispatching). */
  orphansDropped: number;
  /** Whether it saved where it left off: not when it stopped early, nor when Redis lost data during it. */
  saved: boolean;
}

/**
 * PostgreSQL is the source of truth, Redis the fast path (docs/architecture.md#the-reconciler). If
 * Redis loses jobs (a flush, a failover, an API that could not reach it when the event was
 * published), deliveries are still due in PostgreSQL. The reconciler finds the due ones without a
 * job and enqueues them. Job id = delivery id, so even if two reconcilers raced, nothing would be
 * queued twice.
 *
 * Its work is proportional to what may be missing, not to the backlog: a pass checks the
 * deliveries that came due since the last pass (a watermark kept in Redis, so that a Redis that
 * lost its data also lost the watermark, and the next pass checks everything), plus a bounded
 * slice of a rolling sweep over all due ones, for a job lost on its own (removed by hand, or
 * dropped after BullMQ's own retries). A million deliveries waiting for a dead receiver cost a
 * pass nothing but that slice.
 *
 * A delivery waiting in an ordered line (docs/api.md#ordered-delivery) has no job until its turn;
 * the one before it enqueues it when it is finished. Each pass checks the head of every line, so
 * that a lost enqueue (its worker killed, Redis flushed) costs a pass, not the line.
 */
export class Reconciler {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #stopped = false;

  constructor(
    private readonly deps: {
      sql: SqlClient;
      queue: DeliveryQueue;
      gate: DeliveryGate;
      logger: Logger;
      metrics: WorkerMetrics;
    },
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

  /** One pass; undefined when another worker holds the lock. */
  async reconcileOnce(): Promise<ReconcilePass | undefined> {
    return withReconcilerLock({ sql: this.deps.sql }, async (sql) => {
      const { state, token } = await this.deps.queue.beginReconcilerPass();
      const now = await databaseNow({ sql });
      const watermark = new Date(now.getTime() - GRACE_MS);
      const pass: ReconcilePass = {
        scanned: 0,
        enqueued: 0,
        justDue: 0,
        promoted: 0,
        lineHeads: 0,
        full: state === undefined,
        orphansDropped: 0,
        saved: false,
      };
      const justDueSince = now.getTime() - JUST_DUE_MS;

      // What came due since the last pass (everything, when there is no watermark).
      const dueSince = state ? new Date(state.watermark.getTime() - WATERMARK_OVERLAP_MS) : undefined;
      await this.#check(sql, pass, justDueSince, { dueSince, limit: Infinity });
      // A slice of the rolling sweep, going on from where the last pass stopped.
      const sweep =
        state && !this.#stopped
          ? await this.#check(sql, pass, justDueSince, { after: state.sweep, limit: SWEEP_PER_PASS })
          : undefined;

      if (!this.#stopped) await this.#checkLineHeads(sql, pass, justDueSince);

      // Not saved when Redis lost data during the pass (see beginReconcilerPass): the next is full.
      if (!this.#stopped) pass.saved = await this.deps.queue.saveReconcilerState({ watermark, sweep }, token);
      pass.orphansDropped = this.#stopped ? 0 : await this.deps.queue.dropOrphanedDispatching(ORPHAN_SAMPLE);
      return pass;
    });
  }

  /** Checks due deliveries page by page; returns where it stopped, or undefined at the end. */
  async #check(
    sql: SqlClient,
    pass: ReconcilePass,
    justDueSince: number,
    range: { dueSince?: Date | undefined; after?: DueCursor | undefined; limit: number },
  ): Promise<DueCursor | undefined> {
    let after = range.after;
    let checked = 0;
    while (checked < range.limit && !this.#stopped) {
      const due = await findDueDeliveries(
        { sql },
        { graceMs: GRACE_MS, limit: Math.min(BATCH, range.limit - checked), after, dueSince: range.dueSince },
      );
      if (due.length === 0) return undefined;
      // Those waiting in an ordered line have no job on purpose.
      await this.#enqueueMissing(
        sql,
        pass,
        justDueSince,
        due.filter((row) => !row.inLine),
      );
      pass.scanned += due.length;
      // Counted page by page: a pass over a big backlog shows its progress, and one that fails
      // midway (Redis or PostgreSQL gone) still counts what it checked and enqueued.
      this.deps.metrics.reconcilerScanned.inc(due.length);
      checked += due.length;
      after = due[due.length - 1];
    }
    return after;
  }

  /** The head of every ordered line, page by page: a due one without a job is enqueued. */
  async #checkLineHeads(sql: SqlClient, pass: ReconcilePass, justDueSince: number): Promise<void> {
    let after: string | undefined;
    while (!this.#stopped) {
      const heads = await lineHeads({ sql }, { graceMs: GRACE_MS, limit: BATCH, after });
      if (heads.length === 0) return;
      const due = heads
        .filter((head) => head.due)
        .map((head) => ({ id: head.deliveryId, nextAttemptAt: head.nextAttemptAt }));
      await this.#enqueueMissing(sql, pass, justDueSince, due);
      pass.lineHeads += heads.length;
      after = heads[heads.length - 1]!.subscriptionId;
    }
  }

  /** Enqueues those of these due deliveries that have no job, and runs those whose job is late. */
  async #enqueueMissing(sql: SqlClient, pass: ReconcilePass, justDueSince: number, due: DueCursor[]): Promise<void> {
    if (due.length === 0) return;
    // Read again after Redis answered: a delivery that ended (delivered, or failed for good)
    // since the page was read has no job because it is done, not because its job was lost.
    const inRedis = await this.deps.queue.inspect(due.map((row) => row.id));
    const missing = await stillDue({ sql }, { ids: inRedis.missing, graceMs: GRACE_MS });
    await this.deps.queue.enqueue(missing);
    // Jobs parked far beyond their delivery's time (a resend or recover that could not reach
    // Redis to bring the job forward): run now.
    const late = await stillDue({ sql }, { ids: inRedis.late, graceMs: GRACE_MS });
    await this.deps.queue.promote(late);
    pass.enqueued += missing.length;
    pass.promoted += late.length;
    this.deps.metrics.reconcilerEnqueued.inc(missing.length + late.length);
    if (missing.length > 0) {
      const missingIds = new Set(missing);
      pass.justDue += due.filter((row) => missingIds.has(row.id) && row.nextAttemptAt.getTime() >= justDueSince).length;
    }
  }

  /**
   * The gate's safety net for wakes that were lost (a worker died between deciding and waking):
   * the deliveries whose turn lapsed untaken are woken, and so is the head of every line with
   * nothing under way. Costs a call per subscription with a line, and one for the lapsed turns.
   */
  async nudgeLines(): Promise<number> {
    const wakes = await this.deps.gate.nudgeAll((wakes) => this.deps.queue.wake(wakes));
    return wakes.length;
  }

  #schedule(delayMs: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      // Settled each on its own: a nudge that fails must not hide what the pass enqueued, nor let
      // stop() return while the pass still runs.
      this.#running = Promise.allSettled([this.reconcileOnce(), this.nudgeLines()])
        .then(([reconciled, nudged]) => {
          if (nudged.status === "rejected")
            this.deps.logger.warn({ err: nudged.reason }, "could not nudge the gate's lines; will try again");
          if (reconciled.status === "rejected") throw reconciled.reason;
          const pass = reconciled.value;
          if (!pass) return;
          if (!pass.saved && !this.#stopped) {
            this.deps.logger.warn(
              "Redis lost data during the reconciler's pass; the next pass checks every due delivery",
            );
          }
          if (pass.orphansDropped > 0) {
            this.deps.logger.warn(
              { entries: pass.orphansDropped },
              "reconciler removed what dropped dispatch jobs left in the index of dispatched deliveries",
            );
          }
          if (pass.promoted > 0) {
            this.deps.logger.warn(
              { promoted: pass.promoted },
              "reconciler brought forward due deliveries whose job was parked until later (a resend or recover that could not reach Redis)",
            );
          }
          if (pass.enqueued === 0) return;
          const lost = pass.enqueued - pass.justDue;
          if (lost > 0) this.deps.logger.warn({ enqueued: lost }, "reconciler enqueued deliveries whose job was lost");
          if (pass.justDue > 0) {
            this.deps.logger.info(
              { enqueued: pass.justDue },
              `reconciler enqueued deliveries that came due in the last ${JUST_DUE_MS / 1000} s and had no job yet (on their way from the API, or an API that could not reach Redis)`,
            );
          }
        })
        .catch((error: unknown) => this.deps.logger.error({ err: error }, "reconciler pass failed; will try again"))
        .finally(() => this.#schedule(this.intervalMs));
    }, delayMs);
  }
}
