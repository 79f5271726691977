import type { Logger } from "@webhooks/core";
import PQueue from "p-queue";

/**
 * What a worker process keeps across its attempts, made once at start (startWorker) and passed
 * to every attempt: the process's attempt slots, and what it remembers of subscriptions and of
 * PostgreSQL's reachability. Nothing here is shared with other processes: Redis and PostgreSQL
 * hold what is.
 */
export interface WorkerState {
  /** The process's attempts at once (see `attemptSlots`). */
  attempts: AttemptSlots;
  /** Subscriptions whose deliveries waited at the gate lately, as this process saw it (see `RecentlyWaiting`). */
  waiting: RecentlyWaiting;
  /**
   * When this process last wrote a success into each subscription's health. The claim's snapshot
   * of the subscription can be older than that (every delivery in flight was claimed before the
   * write), and without this each of them would write `last_success_at` again within its second.
   */
  successWritten: BoundedMap<Date>;
  /** How long to park jobs while PostgreSQL is out of reach (see `outageBackoff`). */
  databaseOutage: OutageBackoff;
}

export function createWorkerState(concurrency: number): WorkerState {
  return {
    attempts: attemptSlots(concurrency),
    waiting: new RecentlyWaiting(),
    successWritten: new BoundedMap(),
    databaseOutage: outageBackoff(),
  };
}

/**
 * WORKER_CONCURRENCY attempts at once, shared by the process's BullMQ workers (a dispatch job
 * carries several deliveries, so the jobs a worker runs do not bound them). A delivery whose
 * turn came at the gate goes before the others waiting here: its turn holds room at the gate for
 * it (docs/architecture.md#the-gate), which nobody else can use until it comes, while a new
 * delivery has been to the gate not yet, and would mostly wait behind it there anyway.
 */
export interface AttemptSlots {
  run<T>(attempt: () => Promise<T>, options: { turn: boolean }): Promise<T>;
}

export function attemptSlots(concurrency: number): AttemptSlots {
  const queue = new PQueue({ concurrency });
  return { run: (attempt, { turn }) => queue.add(attempt, { priority: turn ? 1 : 0 }) };
}

/**
 * Subscriptions whose deliveries waited at the gate in the last few seconds, as this process saw
 * it: only their jobs are pre-checked, so a busy subscription that never waits pays no extra call.
 */
export class RecentlyWaiting {
  static readonly MEMORY_MS = 10_000;
  readonly #until = new BoundedMap<number>();

  note(subscriptionId: string, now = Date.now()): void {
    this.#until.set(subscriptionId, now + RecentlyWaiting.MEMORY_MS);
  }

  has(subscriptionId: string, now = Date.now()): boolean {
    return (this.#until.get(subscriptionId) ?? 0) > now;
  }
}

/** A map that forgets everything once it holds more than `limit` entries: a cache, never a record. */
export class BoundedMap<V> {
  readonly #map = new Map<string, V>();
  constructor(private readonly limit = 10_000) {}

  get(key: string): V | undefined {
    return this.#map.get(key);
  }

  set(key: string, value: V): void {
    if (this.#map.size > this.limit) this.#map.clear();
    this.#map.set(key, value);
  }
}

export type OutageBackoff = ReturnType<typeof outageBackoff>;

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
    parkFor(logger: Pick<Logger, "warn">, now = Date.now()): number {
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
