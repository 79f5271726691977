import { existsSync } from "node:fs";
import { type TestReceiver, withClient } from "@webhooks/testing";
import { ApiClient } from "../api-client.ts";
import { type CpuTarget, type CpuUsage, postgresTarget, startCpuWindow } from "../cpu-usage.ts";
import { freshDatabaseFor } from "../databases.ts";
import { type Service, startApi, startWorker } from "../services.ts";
import { ADMIN_DATABASE_URL, DATABASES, RUN_PREFIX, settings } from "../settings.ts";
import { seedHistory } from "./history-seed.ts";

export interface WorkerSetup {
  workers: number;
  concurrency: number;
}

/**
 * A worker's settings for the throughput and latency phases. Their subscriptions all point at
 * one loopback receiver, which stands in for as many customers' hosts; being one origin here, it
 * would be held to ORIGIN_MAX_IN_FLIGHT, which protects everyone from one bad host and is not what
 * these phases measure. So the origin's cap is twice the worker slots: out of reach, as the
 * caps of many hosts would be (a worker keeps the gate's slots of a busy subscription for its
 * next attempts only while the origin has a quarter of its cap to spare, see the gate).
 */
export function workerEnv(setup: WorkerSetup): Record<string, string> {
  return {
    WORKER_CONCURRENCY: String(setup.concurrency),
    ORIGIN_MAX_IN_FLIGHT: String(2 * setup.concurrency * setup.workers),
  };
}

/**
 * The subscriptions of these phases take as many attempts in flight as the workers can make, as
 * a customer sending hundreds of webhooks a second to one endpoint would set `max_in_flight`:
 * these phases measure how fast the pipeline is, not the default cap (phase 5 measures that).
 */
export function subscriptionSettings(setup: WorkerSetup, baseline?: string): Record<string, unknown> {
  // A `--baseline` checkout from before endpoint isolation (no gate) knows no max_in_flight, and has no caps to lift.
  if (baseline !== undefined && !existsSync(`${baseline}packages/queue/src/delivery-gate.ts`)) return {};
  return { max_in_flight: Math.min(1_000, setup.concurrency * setup.workers) };
}

/** What PostgreSQL did for the run, from its statistics views (the database is fresh per run). */
export interface DatabaseWork {
  transactions: number;
  rowsInserted: number;
  rowsUpdated: number;
  /** Updates of deliveries rows that were HOT (no index entry written), out of all updates. */
  deliveryUpdates: number;
  deliveryHotUpdates: number;
  deliveryIndexes: number;
  /** The deliveries table's fillfactor (100, PostgreSQL's default, unless the schema sets one). */
  deliveryFillfactor: number;
}

/**
 * W10: every event matches all 10 subscriptions (a fan-out of 10 per publish). W1: every event
 * matches exactly one of them (each subscription has a type of its own), one event per request,
 * so the API publishes as many events as the workers make deliveries.
 */
export type Workload = "W10" | "W1";

export interface ThroughputResult extends WorkerSetup {
  workload: Workload;
  /** Closed-loop publishers: requests in flight at once. */
  publishers: number;
  /** Events published. */
  events: number;
  deliveries: number;
  /** From the first publish to the last expected verified delivery at the receiver. */
  seconds: number;
  perSecond: number;
  /** How long publishing all events through the API took, and how many were not accepted. */
  publishSeconds: number;
  publishRejected: number;
  invalidSignatures: number;
  duplicates: number;
  /** Deliveries by status in PostgreSQL once the receiver had them all. */
  databaseStatuses: Record<string, number>;
  /** Seconds from the first publish until PostgreSQL recorded every delivery as delivered. */
  recordedSeconds: number | undefined;
  /** GET /v1/deliveries?status=queued after the run: must be empty. */
  queuedListedByApi: number;
  /** The most connections to the database seen at once (sampled every 250 ms). */
  peakConnections: number;
  timedOut: boolean;
  cpu: CpuUsage;
  database: DatabaseWork;
  /** The measured window in microseconds of CLOCK_MONOTONIC, to cut CPU profiles to it. */
  windowUs: { fromUs: number; toUs: number };
  /** Process ids of the children (for a profiled run: the node processes themselves). */
  pids: { api: number; workers: number[] };
}

const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);

export const EVENT_TYPE = "invoice.paid";
let runNumber = 0;

/** Requests in flight that keep settings.throughput.deliveriesInFlight deliveries on their way: 16 in W10, 160 in W1. */
export function publishersFor(workload: Workload): number {
  const perEvent = workload === "W10" ? settings.throughput.subscriptions : 1;
  return Math.ceil(settings.throughput.deliveriesInFlight / perEvent);
}

/**
 * Phase 1: end-to-end deliveries per second. The real API and worker processes run on a fresh
 * database; `subscriptions` subscriptions all match the event type and point at the receiver;
 * events are published through POST /v1/events by closed-loop clients (publishersFor). The
 * clock runs from the first publish to the moment the receiver has verified the last expected
 * delivery, so it covers the API, the queue, the worker, and the signing.
 */
export async function measureThroughput(
  receiver: TestReceiver,
  setup: WorkerSetup,
  options: {
    workload?: Workload;
    /** Deliveries to make (W10: events x 10; W1: as many events). */
    deliveries?: number;
    /** Closed-loop publishers (requests in flight); default: publishersFor(workload). */
    publishers?: number;
    timeoutMs?: number;
    nodeArgs?: { api: string[]; worker: (index: number) => string[] };
    /** Called once the services run, with their pids (the profiling run cleans up after them). */
    onStarted?: (pids: { api: number; workers: number[] }) => void;
    /** Called at the first publish and at the end of the measured window (the profiling run records between). */
    onMeasuring?: () => void;
    onMeasured?: () => Promise<void>;
    /**
     * Runs the services of this checkout of the code from before endpoint isolation instead of
     * this one's (`--baseline`), its subscriptions created without the settings it does not know.
     */
    baseline?: string;
  } = {},
): Promise<ThroughputResult> {
  const run = ++runNumber;
  const workload = options.workload ?? "W10";
  const subscriptions = settings.throughput.subscriptions;
  const expected = options.deliveries ?? settings.throughput.events * subscriptions;
  const events = workload === "W10" ? Math.ceil(expected / subscriptions) : expected;
  /** The event type of subscription i, and of event number seq. */
  const typeOf = (i: number) => (workload === "W10" ? EVENT_TYPE : `${EVENT_TYPE}.s${i}`);
  const databaseUrl = await freshDatabaseFor(DATABASES.main, options.baseline);
  const prefix = `${RUN_PREFIX}-t${run}`;
  const api = await startApi(databaseUrl, prefix, {}, options.nodeArgs?.api, options.baseline);
  const workers = await Promise.all(
    Array.from({ length: setup.workers }, (_, i) =>
      startWorker(
        `worker-${i + 1}`,
        databaseUrl,
        prefix,
        workerEnv(setup),
        options.nodeArgs?.worker(i),
        options.baseline,
      ),
    ),
  );
  options.onStarted?.({ api: api.pid, workers: workers.map((worker) => worker.pid) });
  const publishers = options.publishers ?? publishersFor(workload);
  const client = new ApiClient(api.baseUrl, publishers);
  let measured: Omit<ThroughputResult, "database" | "pids">;
  let databaseBefore: DatabaseWork | undefined;
  try {
    for (let i = 0; i < subscriptions; i++) {
      const path = `/t${run}/s${i}`;
      const subscription = await client.createSubscription(
        `${receiver.url}${path}`,
        [typeOf(i)],
        subscriptionSettings(setup, options.baseline),
      );
      receiver.useSecret(path, subscription.secret);
    }
    const { seededBefore } = await seedHistory(databaseUrl, settings.throughput.historyDeliveries);
    // The run's own work: what PostgreSQL's counters hold past this point.
    databaseBefore = await databaseWork(databaseUrl);
    receiver.resetCounts();

    const cpuTargets: CpuTarget[] = [
      { label: "api", processGroup: api.processGroup },
      ...workers.map((worker) => ({ label: worker.name, processGroup: worker.processGroup })),
      postgresTarget(Object.values(DATABASES)),
      { label: "redis", command: "redis-server" },
      { label: "bench (publisher+receiver)", pid: process.pid },
    ];
    const connections = watchConnections(databaseUrl);
    const endCpuWindow = startCpuWindow(cpuTargets);
    const started = performance.now();
    const fromUs = monotonicUs();
    options.onMeasuring?.();
    const allReceived = receiver.whenVerified(expected);

    let next = 0;
    let rejected = 0;
    const publisher = async () => {
      while (next < events) {
        const seq = next++;
        const status = await client.publish(typeOf(seq % subscriptions), {
          invoice_id: `in_${run}_${seq}`,
          amount_due: 4200,
          currency: "usd",
          seq,
        });
        if (status !== 202) rejected++;
      }
    };
    const publishing = Promise.all(Array.from({ length: publishers }, publisher)).then(() => performance.now());
    // A publishing error (the API went away) ends the wait at once instead of at the timeout.
    const publishFailed = publishing.then(() => new Promise<never>(() => {}));

    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<undefined>(
      (resolve) => (timer = setTimeout(() => resolve(undefined), options.timeoutMs ?? settings.throughput.timeoutMs)),
    );
    const finishedAt = await Promise.race([allReceived, timeout, publishFailed]);
    clearTimeout(timer);
    const cpu = endCpuWindow();
    const toUs = monotonicUs();
    await options.onMeasured?.();
    const peakConnections = await connections.stop();
    const publishedAt = await publishing;
    const timedOut = finishedAt === undefined;
    const seconds = ((finishedAt ?? performance.now()) - started) / 1000;
    const delivered = timedOut ? receiver.verified : expected;

    // The receiver has them all; PostgreSQL must agree (the last records land just after).
    const { statuses, recordedAt } = await waitForRecorded(databaseUrl, expected, seededBefore);
    const queued = await client.request<{ data: unknown[] }>("GET", "/v1/deliveries?status=queued&limit=100");

    measured = {
      ...setup,
      workload,
      publishers,
      events,
      deliveries: delivered,
      seconds,
      perSecond: delivered / seconds,
      publishSeconds: (publishedAt - started) / 1000,
      publishRejected: rejected,
      invalidSignatures: receiver.invalid,
      duplicates: receiver.duplicates,
      databaseStatuses: statuses,
      recordedSeconds: recordedAt === undefined ? undefined : (recordedAt - started) / 1000,
      queuedListedByApi: queued.body.data.length,
      peakConnections,
      timedOut,
      cpu,
      windowUs: { fromUs, toUs },
    };
  } finally {
    await client.close();
    // Workers first, so that none is mid-attempt when the API and the database go away.
    await Promise.all(workers.map((worker) => worker.stop()));
    await api.stop();
    reportServiceOutput([api, ...workers]);
  }
  // Read after the services stopped: their backends flush their statistics when they exit.
  const result: ThroughputResult = {
    ...measured,
    database: since(await databaseWork(databaseUrl), databaseBefore),
    pids: { api: api.pid, workers: workers.map((worker) => worker.pid) },
  };
  console.log(
    `  ${workload} (${publishers} publishers), ${setup.workers} worker(s) x concurrency ${setup.concurrency}: ${result.deliveries} deliveries in ${result.seconds.toFixed(2)} s = ` +
      `${Math.round(result.perSecond)}/s${result.timedOut ? " (TIMED OUT)" : ""}; published in ${result.publishSeconds.toFixed(2)} s; ` +
      `invalid signatures ${result.invalidSignatures}, duplicates ${result.duplicates}; in PostgreSQL ${JSON.stringify(result.databaseStatuses)}, ` +
      `queued listed by the API ${result.queuedListedByApi}`,
  );
  return result;
}

/**
 * Why a setup cannot run on this server, if it cannot. The API and each worker hold up to
 * DATABASE_POOL_SIZE (10) connections (the worker batches its claims and records). A setup that could
 * exhaust max_connections would fail with "too many clients", and would take connections from
 * anyone else using this server, so it is skipped and reported instead.
 */
export async function connectionShortfall(setup: WorkerSetup): Promise<string | undefined> {
  const perWorker = 10;
  const needed = setup.workers * perWorker + 10 + 5;
  const { max, used } = await withClient(ADMIN_DATABASE_URL, async (db) => {
    const { rows } = await db.query<{ max: number; used: number }>(
      "SELECT current_setting('max_connections')::int AS max, (SELECT count(*)::int FROM pg_stat_activity WHERE backend_type = 'client backend') AS used",
    );
    return rows[0]!;
  });
  if (needed <= max - used) return undefined;
  return (
    `its pools may open ${setup.workers} x ${perWorker} (worker) + 10 (API) + 5 (benchmark) = ${needed} connections, ` +
    `and the server allows ${max} (max_connections) with ${used} in use`
  );
}

/** The services log at warn level: anything they printed is worth a look, so show its start. */
export function reportServiceOutput(services: Service[]): void {
  for (const service of services) {
    const lines = service
      .output()
      .split("\n")
      .filter((line) => line.trim() !== "");
    if (lines.length === 0) continue;
    console.log(
      `    ${service.name} printed ${lines.length} line(s), e.g.: ${lines
        .slice(0, 2)
        .map((line) => line.slice(0, 300))
        .join(" | ")}`,
    );
  }
}

/** Samples how many backends are connected to the database, until stopped; returns the peak. */
function watchConnections(databaseUrl: string): { stop(): Promise<number> } {
  let peak = 0;
  let stopped = false;
  const watching = withClient(databaseUrl, async (db) => {
    while (!stopped) {
      const { rows } = await db.query<{ count: number }>(
        "SELECT count(*)::int AS count FROM pg_stat_activity WHERE datname = current_database()",
      );
      // Minus this watcher's own connection.
      peak = Math.max(peak, (rows[0]?.count ?? 1) - 1);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }).catch(() => undefined); // The figure is informative; losing the watcher must not end the run.
  return {
    async stop() {
      stopped = true;
      await watching;
      return peak;
    },
  };
}

/** Waits until PostgreSQL has the run's deliveries (those created after the history) delivered. */
async function waitForRecorded(
  databaseUrl: string,
  expected: number,
  after: Date,
): Promise<{ statuses: Record<string, number>; recordedAt: number | undefined }> {
  return withClient(databaseUrl, async (db) => {
    const deadline = performance.now() + 15_000;
    for (;;) {
      const { rows } = await db.query<{ status: string; count: number }>(
        "SELECT status::text AS status, count(*)::int AS count FROM deliveries WHERE created_at > $1 GROUP BY status",
        [after],
      );
      const statuses = Object.fromEntries(rows.map((row) => [row.status, row.count]));
      if (statuses.delivered === expected) return { statuses, recordedAt: performance.now() };
      if (performance.now() > deadline) return { statuses, recordedAt: undefined };
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  });
}

/** The counters' growth since `before` (the history's load is not the run's work). */
function since(after: DatabaseWork, before: DatabaseWork | undefined): DatabaseWork {
  if (!before) return after;
  return {
    ...after,
    transactions: after.transactions - before.transactions,
    rowsInserted: after.rowsInserted - before.rowsInserted,
    rowsUpdated: after.rowsUpdated - before.rowsUpdated,
    deliveryUpdates: after.deliveryUpdates - before.deliveryUpdates,
    deliveryHotUpdates: after.deliveryHotUpdates - before.deliveryHotUpdates,
  };
}

async function databaseWork(databaseUrl: string): Promise<DatabaseWork> {
  return withClient(databaseUrl, async (db) => {
    const {
      rows: [database],
    } = await db.query<{ xact_commit: string; tup_inserted: string; tup_updated: string }>(
      "SELECT xact_commit, tup_inserted, tup_updated FROM pg_stat_database WHERE datname = current_database()",
    );
    const {
      rows: [deliveries],
    } = await db.query<{ n_tup_upd: string; n_tup_hot_upd: string; indexes: number; fillfactor: number | null }>(
      `SELECT n_tup_upd, n_tup_hot_upd, (SELECT count(*)::int FROM pg_indexes WHERE tablename = 'deliveries') AS indexes,
              (SELECT substring(option FROM 'fillfactor=(\\d+)')::int FROM pg_class, unnest(reloptions) AS option
               WHERE relname = 'deliveries' AND option LIKE 'fillfactor=%') AS fillfactor
       FROM pg_stat_user_tables WHERE relname = 'deliveries'`,
    );
    return {
      transactions: Number(database?.xact_commit ?? 0),
      rowsInserted: Number(database?.tup_inserted ?? 0),
      rowsUpdated: Number(database?.tup_updated ?? 0),
      deliveryUpdates: Number(deliveries?.n_tup_upd ?? 0),
      deliveryHotUpdates: Number(deliveries?.n_tup_hot_upd ?? 0),
      deliveryIndexes: deliveries?.indexes ?? 0,
      deliveryFillfactor: deliveries?.fillfactor ?? 100,
    };
  });
}
