import type { Logger } from "@webhooks/core";
import { type PrunedRows, type PrunePass, pruneExpired, type SqlClient, withPrunerLock } from "@webhooks/db";
import type { WorkerMetrics } from "./metrics.ts";

/**
 * Deliveries deleted per statement. Each batch is one short transaction, so a pass never holds
 * locks or the disk for long. Small, because what a pass costs the publishes is its bursts of
 * WAL: a publish that commits during one waits for the flush of it, and the size of each burst
 * matters more than the rate (docs/operations.md#retention).
 */
const BATCH_SIZE = 50;

/**
 * After each batch the pass rests this many times as long as the batch took, so that it keeps a
 * PostgreSQL backend busy at most a tenth of the time, whatever the machine, and still deletes
 * faster than the service can insert. Only a first pass over a big log is long: each later one
 * deletes what aged out since the one before.
 */
const REST_RATIO = 9;

/** The series of webhook_pruned_rows_total: rows deleted by table, and payloads erased. */
const SERIES = ["deliveries", "delivery_attempts", "events", "endpoint_credentials", "event_payloads"] as const;

/**
 * Retention (docs/api.md#retention): every PRUNE_INTERVAL, erases the payloads older than
 * PAYLOAD_RETENTION (docs/api.md#payload-retention), then deletes finished deliveries older than
 * RETENTION with their attempts, the events left without deliveries, and the endpoint
 * credentials no subscription uses and no delivery refers to any more. Every worker runs one;
 * a session advisory lock lets one of them prune at a time, and the batches themselves skip rows
 * another pruner holds, so two pruners never fail on or count the same row. Stopping the worker
 * ends a pass between two batches.
 */
export class Pruner {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #stopped = false;
  /** Ends the rest in progress at once, when the worker stops. */
  #wake: (() => void) | undefined;

  constructor(
    private readonly deps: { sql: SqlClient; logger: Logger; metrics: WorkerMetrics },
    private readonly options: {
      /** Undefined: RETENTION=off, nothing is deleted. */
      retentionMs: number | undefined;
      /** Undefined: no payload is erased. */
      payloadRetentionMs?: number | undefined;
      intervalMs: number;
      batchSize?: number;
      /** Tests shorten it; RETIRED_CREDENTIALS_GRACE_MS otherwise. */
      credentialsGraceMs?: number;
    },
  ) {
    // Export the series at 0 from the start, so a rate over them is defined before the first prune.
    for (const table of SERIES) deps.metrics.prunedRows.inc({ table }, 0);
  }

  start(): void {
    this.#stopped = false;
    this.#schedule(this.options.intervalMs);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#wake?.();
    await this.#running;
  }

  /** One pass; undefined when another worker holds the lock. */
  async pruneOnce(): Promise<PrunePass | undefined> {
    const startedAt = Date.now();
    const pass = await withPrunerLock({ sql: this.deps.sql }, (sql) =>
      pruneExpired(
        { sql },
        {
          retentionMs: this.options.retentionMs,
          payloadRetentionMs: this.options.payloadRetentionMs,
          batchSize: this.options.batchSize ?? BATCH_SIZE,
          credentialsGraceMs: this.options.credentialsGraceMs,
          shouldStop: () => this.#stopped,
          rest: (ms) => this.#rest(ms * REST_RATIO),
          // Counted batch by batch: a long pass shows its progress, and one that fails midway still counts what it deleted.
          onBatch: (deleted) => this.#count(deleted),
        },
      ),
    );
    if (!pass) return undefined;
    if (pass.deliveries + pass.attempts + pass.events + pass.payloads + pass.credentials > 0 || !pass.complete) {
      this.deps.logger.info(
        {
          deliveries: pass.deliveries,
          attempts: pass.attempts,
          events: pass.events,
          payloads: pass.payloads,
          credentials: pass.credentials,
          batches: pass.batches,
          complete: pass.complete,
          durationMs: Date.now() - startedAt,
        },
        pass.complete
          ? "pruned finished deliveries past retention"
          : "pruning stopped early (worker stopping); the next pass goes on",
      );
    }
    return pass;
  }

  #count(deleted: PrunedRows): void {
    this.deps.metrics.prunedRows.inc({ table: "deliveries" }, deleted.deliveries);
    this.deps.metrics.prunedRows.inc({ table: "delivery_attempts" }, deleted.attempts);
    this.deps.metrics.prunedRows.inc({ table: "events" }, deleted.events);
    this.deps.metrics.prunedRows.inc({ table: "endpoint_credentials" }, deleted.credentials);
    this.deps.metrics.prunedRows.inc({ table: "event_payloads" }, deleted.payloads);
  }

  #rest(ms: number): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.#wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  #schedule(delayMs: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#running = this.pruneOnce()
        .then(() => {})
        .catch((error: unknown) => this.deps.logger.error({ err: error }, "pruner pass failed; will try again"))
        .finally(() => this.#schedule(this.options.intervalMs));
    }, delayMs);
  }
}
