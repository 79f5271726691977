import { ApiClient } from "./api-client.ts";
import { postgresTarget, startCpuWindow, type CpuTarget, type CpuUsage } from "./cpu-usage.ts";
import { freshDatabase, withClient } from "./databases.ts";
import type { Receiver } from "./receiver.ts";
import { startApi, startWorker } from "./services.ts";
import { DATABASES, RUN_PREFIX, settings } from "./settings.ts";

export interface WorkerSetup {
  workers: number;
  concurrency: number;
}

export interface ThroughputResult extends WorkerSetup {
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
  timedOut: boolean;
  cpu: CpuUsage;
}

export const EVENT_TYPE = "invoice.paid";
let runNumber = 0;

/**
 * Phase 1: end-to-end deliveries per second. The real API and worker processes run on a fresh
 * database; `subscriptions` subscriptions all match the event type and point at the receiver;
 * events are published through POST /v1/events by a fixed number of closed-loop clients. The
 * clock runs from the first publish to the moment the receiver has verified the last expected
 * delivery, so it covers the API, the queue, the worker, and the signing.
 */
export async function measureThroughput(
  receiver: Receiver,
  setup: WorkerSetup,
  options: { events?: number; nodeArgs?: { api: string[]; worker: (index: number) => string[] }; quiet?: boolean } = {},
): Promise<ThroughputResult> {
  const run = ++runNumber;
  const events = options.events ?? settings.throughput.events;
  const expected = events * settings.throughput.subscriptions;
  const databaseUrl = await freshDatabase(DATABASES.main);
  const prefix = `${RUN_PREFIX}-t${run}`;
  const api = await startApi(databaseUrl, prefix, {}, options.nodeArgs?.api);
  const workers = await Promise.all(
    Array.from({ length: setup.workers }, (_, i) =>
      startWorker(`worker-${i + 1}`, databaseUrl, prefix, { WORKER_CONCURRENCY: String(setup.concurrency) }, options.nodeArgs?.worker(i)),
    ),
  );
  const client = new ApiClient(api.baseUrl, settings.throughput.publishConcurrency);
  try {
    for (let i = 0; i < settings.throughput.subscriptions; i++) {
      const path = `/t${run}/s${i}`;
      const subscription = await client.createSubscription(`${receiver.url}${path}`, [EVENT_TYPE]);
      receiver.expect(path, subscription.secret);
    }
    receiver.reset();

    const cpuTargets: CpuTarget[] = [
      { label: "api", processGroup: api.processGroup },
      ...workers.map((worker) => ({ label: worker.name, processGroup: worker.processGroup })),
      postgresTarget(Object.values(DATABASES)),
      { label: "redis", command: "redis-server" },
      { label: "bench (publisher+receiver)", pid: process.pid },
    ];
    const endCpuWindow = startCpuWindow(cpuTargets);
    const started = performance.now();
    const allReceived = receiver.whenVerified(expected);

    let next = 0;
    let rejected = 0;
    const publisher = async () => {
      while (next < events) {
        const seq = next++;
        const status = await client.publish(EVENT_TYPE, { invoice_id: `in_${run}_${seq}`, amount_due: 4200, currency: "usd", seq });
        if (status !== 202) rejected++;
      }
    };
    const publishing = Promise.all(Array.from({ length: settings.throughput.publishConcurrency }, publisher)).then(() => performance.now());

    let timer: NodeJS.Timeout | undefined;
    const timeoutMs = options.events ? settings.profile.timeoutMs : settings.throughput.timeoutMs;
    const finishedAt = await Promise.race([
      allReceived,
      new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), timeoutMs))),
    ]);
    clearTimeout(timer);
    const cpu = endCpuWindow();
    const publishedAt = await publishing;
    const timedOut = finishedAt === undefined;
    const seconds = ((finishedAt ?? performance.now()) - started) / 1000;
    const delivered = timedOut ? receiver.verified : expected;

    // The receiver has them all; PostgreSQL must agree (the last records land just after).
    const { statuses, recordedAt } = await waitForRecorded(databaseUrl, expected);
    const queued = await client.request<{ data: unknown[] }>("GET", "/v1/deliveries?status=queued&limit=100");

    const result: ThroughputResult = {
      ...setup,
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
      timedOut,
      cpu,
    };
    if (!options.quiet) {
      console.log(
        `  ${setup.workers} worker(s) x concurrency ${setup.concurrency}: ${delivered} deliveries in ${seconds.toFixed(2)} s = ` +
          `${Math.round(result.perSecond)}/s${timedOut ? " (TIMED OUT)" : ""}; published in ${result.publishSeconds.toFixed(2)} s; ` +
          `invalid signatures ${receiver.invalid}, duplicates ${receiver.duplicates}; db ${JSON.stringify(statuses)}`,
      );
    }
    return result;
  } finally {
    await client.close();
    // Workers first, so that none is mid-attempt when the API and the database go away.
    await Promise.all(workers.map((worker) => worker.stop()));
    await api.stop();
  }
}

async function waitForRecorded(databaseUrl: string, expected: number): Promise<{ statuses: Record<string, number>; recordedAt: number | undefined }> {
  return withClient(databaseUrl, async (db) => {
    const deadline = performance.now() + 15_000;
    for (;;) {
      const { rows } = await db.query<{ status: string; count: number }>("SELECT status::text AS status, count(*)::int AS count FROM deliveries GROUP BY status");
      const statuses = Object.fromEntries(rows.map((row) => [row.status, row.count]));
      if (statuses.delivered === expected) return { statuses, recordedAt: performance.now() };
      if (performance.now() > deadline) return { statuses, recordedAt: undefined };
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  });
}
