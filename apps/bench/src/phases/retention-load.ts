import { type TestReceiver, withClient } from "@webhooks/testing";
import { ApiClient } from "../api-client.ts";
import { type CpuUsage, postgresTarget, startCpuWindow } from "../cpu-usage.ts";
import { dropDatabase, dropIdleDatabases, freshDatabase } from "../databases.ts";
import { sleep, startApi } from "../services.ts";
import { RUN_PREFIX, SCALE_DATABASES, settings } from "../settings.ts";
import { type Summary, summarize } from "../stats.ts";
import { startWatchedWorker } from "../worker-process.ts";
import { type SeededLog, seedRetentionLog } from "./retention-seed.ts";
import { reportServiceOutput } from "./throughput.ts";

const LOAD_TYPE = "invoice.paid";

export interface DeletedRows {
  deliveries: number;
  attempts: number;
  events: number;
}

export interface LoadWindow {
  label: string;
  pruning: boolean;
  seconds: number;
  /** Scheduled send time to the API's 202 (open loop). */
  publish: Summary;
  publishRejected: number;
  /** One list request at a time: send to the whole response. */
  list: Summary;
  listErrors: number;
  cpu: CpuUsage;
  /** The WAL the whole server wrote in the measured part (pg_stat_wal): what a pass adds is mostly full-page images. */
  wal: WalRate;
  /** Rows deleted while the window's worker ran (warm-up included), and for how long it ran. */
  deleted: DeletedRows;
  workerSeconds: number;
}

export interface WalRate {
  megabytesPerSecond: number;
  fullPageImagesPerSecond: number;
}

export interface RetentionResult {
  seeded: SeededLog;
  windows: LoadWindow[];
}

/**
 * Phase 8: does a pruning pass disturb the service? A database with a 10,000,000-delivery log
 * (retention-seed.ts) and an API process on it. Each window starts a worker process, runs a
 * warm-up that is not counted, then measures for `windowMs`: events published open loop at a
 * steady rate (each to the phase's one subscription, delivered by the worker to the receiver)
 * and `GET /v1/deliveries` requests one at a time at a steady rate, the list cases taking turns.
 * Windows with RETENTION=off and windows with a short RETENTION and PRUNE_INTERVAL=1s take turns,
 * quiet first and last: the quiet ones' spread is the noise, and the pruning ones' pruner deletes
 * throughout, as one would after the retention was first set on a big log. Taking turns, rather
 * than pruning last, keeps a drift of the host's speed over the phase (seen: p99s of the same
 * settings 8 ms apart within minutes) from being charged to the pruner. Every window begins
 * after a CHECKPOINT, so that none pays for the writes of the one before. Rows deleted come from
 * PostgreSQL's own counters (pg_stat_user_tables), read after the worker has stopped.
 */
export async function measureRetention(receiver: TestReceiver): Promise<RetentionResult> {
  const r = settings.retention;
  await dropIdleDatabases(`webhooks_bench_retention_`);
  const databaseUrl = await freshDatabase(SCALE_DATABASES.retention);
  try {
    const seeded = await withClient(databaseUrl, seedRetentionLog);
    console.log(
      `  seeded ${seeded.deliveries.toLocaleString("en-US")} deliveries, ${seeded.attempts.toLocaleString("en-US")} attempts, ` +
        `${seeded.events.toLocaleString("en-US")} events (${(seeded.bytes / 1024 ** 3).toFixed(1)} GB with indexes) in ${seeded.seconds.toFixed(0)} s ` +
        `(rows ${seeded.steps.loadSeconds.toFixed(0)} s, indexes ${seeded.steps.indexSeconds.toFixed(0)} s, VACUUM ANALYZE ${seeded.steps.vacuumSeconds.toFixed(0)} s); ` +
        `${seeded.prunable.toLocaleString("en-US")} finished deliveries older than ${r.retentionDays} days`,
    );

    const prefix = `${RUN_PREFIX}-retention`;
    const api = await startApi(databaseUrl, prefix);
    const client = new ApiClient(api.baseUrl, r.connections);
    const windows: LoadWindow[] = [];
    try {
      const subscription = await client.createSubscription(`${receiver.url}/retention`, [LOAD_TYPE]);
      receiver.useSecret("/retention", subscription.secret);
      const seededSubscription = await withClient(databaseUrl, async (db) => {
        const { rows } = await db.query<{ id: string }>(
          "SELECT id FROM subscriptions WHERE url LIKE 'http://127.0.0.1:9/%' ORDER BY id LIMIT 1",
        );
        return rows[0]!.id;
      });
      const listPaths = [
        "/v1/deliveries",
        `/v1/deliveries?subscription_id=${seededSubscription}`,
        "/v1/deliveries?status=failed",
        `/v1/deliveries?subscription_id=${seededSubscription}&status=failed`,
      ];
      const quiet = (n: number) => ({ label: `without pruning (${n})`, env: { RETENTION: "off" } });
      const pruning = (n: number) => ({
        label: `pruning (${n}, RETENTION=${r.retentionDays}d)`,
        env: { RETENTION: `${r.retentionDays}d`, PRUNE_INTERVAL: "1s" },
      });
      const plans: { label: string; env: Record<string, string> }[] = [
        quiet(1),
        pruning(1),
        quiet(2),
        pruning(2),
        quiet(3),
      ];
      for (const plan of plans) {
        // The dirty pages of the seed, and of the window before, are written now, not by a
        // checkpoint in the middle of the measurements.
        await withClient(databaseUrl, (db) => db.query("CHECKPOINT"));
        const window = await runWindow({
          databaseUrl,
          prefix,
          api: { processGroup: api.processGroup },
          client,
          listPaths,
          ...plan,
        });
        windows.push(window);
        console.log(`  ${describeWindow(window)}`);
      }
    } finally {
      await client.close();
      await api.stop();
      reportServiceOutput([api]);
    }
    return { seeded, windows };
  } finally {
    // ~10 GB: free the disk at once, not at the end of the run.
    await dropDatabase(SCALE_DATABASES.retention);
  }
}

export function describeWindow(w: LoadWindow): string {
  const perSecond = (n: number) => Math.round(n / Math.max(0.001, w.workerSeconds)).toLocaleString("en-US");
  return (
    `${w.label}: publish p50 ${w.publish.p50.toFixed(1)} ms, p99 ${w.publish.p99.toFixed(1)} ms (${w.publish.count} events, ${w.publishRejected} not accepted); ` +
    `list p50 ${w.list.p50.toFixed(1)} ms, p99 ${w.list.p99.toFixed(1)} ms (${w.list.count} requests, ${w.listErrors} errors); ` +
    (w.pruning
      ? `pruned ${w.deleted.deliveries.toLocaleString("en-US")} deliveries (${perSecond(w.deleted.deliveries)}/s), ${w.deleted.attempts.toLocaleString("en-US")} attempts, ` +
        `${w.deleted.events.toLocaleString("en-US")} events in ${w.workerSeconds.toFixed(0)} s; `
      : "") +
    `WAL ${w.wal.megabytesPerSecond.toFixed(1)} MB/s (${Math.round(w.wal.fullPageImagesPerSecond).toLocaleString("en-US")} full-page images/s); ` +
    `CPU: ${w.cpu.cores.map((c) => `${c.label} ${c.cores.toFixed(2)}`).join(", ")}; machine ${w.cpu.machineCores.toFixed(2)} cores busy`
  );
}

async function runWindow(input: {
  databaseUrl: string;
  prefix: string;
  api: { processGroup: number };
  client: ApiClient;
  listPaths: string[];
  label: string;
  env: Record<string, string>;
}): Promise<LoadWindow> {
  const r = settings.retention;
  const before = await deletedRows(input.databaseUrl);
  const worker = await startWatchedWorker(`worker (${input.label})`, input.databaseUrl, input.prefix, input.env);
  const workerStarted = performance.now();
  let measured: Omit<LoadWindow, "deleted" | "workerSeconds">;
  let workerSeconds: number;
  try {
    await runLoad(input.client, input.listPaths, r.warmupMs);
    const endCpu = startCpuWindow([
      { label: "api", processGroup: input.api.processGroup },
      { label: "worker", processGroup: worker.processGroup },
      postgresTarget([SCALE_DATABASES.retention]),
      { label: "redis", command: "redis-server" },
      { label: "bench", pid: process.pid },
    ]);
    const walBefore = await walTotals(input.databaseUrl);
    const load = await runLoad(input.client, input.listPaths, r.windowMs);
    const walAfter = await walTotals(input.databaseUrl);
    const wal = {
      megabytesPerSecond: (walAfter.bytes - walBefore.bytes) / 1024 ** 2 / load.seconds,
      fullPageImagesPerSecond: (walAfter.fullPageImages - walBefore.fullPageImages) / load.seconds,
    };
    measured = { label: input.label, pruning: input.env.RETENTION !== "off", ...load, cpu: endCpu(), wal };
  } finally {
    workerSeconds = (performance.now() - workerStarted) / 1000;
    await worker.stop();
    reportServiceOutput([worker]);
  }
  // Read after the worker stopped: a backend flushes its counters when it exits.
  const after = await deletedRows(input.databaseUrl);
  return {
    ...measured,
    deleted: {
      deliveries: after.deliveries - before.deliveries,
      attempts: after.attempts - before.attempts,
      events: after.events - before.events,
    },
    workerSeconds,
  };
}

/** Publishes open loop at the phase's rate and lists one request at a time, for `durationMs`. */
async function runLoad(
  client: ApiClient,
  listPaths: string[],
  durationMs: number,
): Promise<{ seconds: number; publish: Summary; publishRejected: number; list: Summary; listErrors: number }> {
  const r = settings.retention;
  const started = performance.now();
  const end = started + durationMs;
  const publishLatency: number[] = [];
  let publishRejected = 0;
  const pending = new Set<Promise<void>>();

  const publishing = (async () => {
    const interval = 1000 / r.publishRatePerSecond;
    for (let seq = 0; ; seq++) {
      const due = started + seq * interval;
      if (due >= end) break;
      // A timer, never a busy wait: spinning would take a core from the service under test.
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      const sending: Promise<void> = client
        .publish(LOAD_TYPE, { seq, scheduled_at: due })
        .then(
          (status) => {
            if (status === 202) publishLatency.push(performance.now() - due);
            else publishRejected++;
          },
          () => void publishRejected++,
        )
        .finally(() => pending.delete(sending));
      pending.add(sending);
    }
  })();

  const listLatency: number[] = [];
  let listErrors = 0;
  const listing = (async () => {
    const interval = 1000 / r.listRatePerSecond;
    for (let i = 0; ; i++) {
      const due = started + i * interval;
      if (due >= end) break;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      const sent = performance.now();
      const reply = await client.request("GET", listPaths[i % listPaths.length]!).catch(() => undefined);
      if (reply?.status === 200) listLatency.push(performance.now() - sent);
      else listErrors++;
    }
  })();

  await Promise.all([publishing, listing]);
  // Answers still on their way belong to the window; wait for them, for a bounded time.
  const deadline = performance.now() + 10_000;
  while (pending.size > 0 && performance.now() < deadline) await sleep(10);
  publishRejected += pending.size;
  return {
    seconds: (performance.now() - started) / 1000,
    publish: summarize(publishLatency),
    publishRejected,
    list: summarize(listLatency),
    listErrors,
  };
}

async function walTotals(databaseUrl: string): Promise<{ bytes: number; fullPageImages: number }> {
  return withClient(databaseUrl, async (db) => {
    const { rows } = await db.query<{ bytes: string; fpi: string }>(
      "SELECT wal_bytes::text AS bytes, wal_fpi::text AS fpi FROM pg_stat_wal",
    );
    return { bytes: Number(rows[0]!.bytes), fullPageImages: Number(rows[0]!.fpi) };
  });
}

async function deletedRows(databaseUrl: string): Promise<DeletedRows> {
  return withClient(databaseUrl, async (db) => {
    const { rows } = await db.query<{ relname: string; n_tup_del: string }>(
      "SELECT relname, n_tup_del FROM pg_stat_user_tables WHERE relname IN ('deliveries', 'delivery_attempts', 'events')",
    );
    const of = (table: string) => Number(rows.find((row) => row.relname === table)?.n_tup_del ?? 0);
    return { deliveries: of("deliveries"), attempts: of("delivery_attempts"), events: of("events") };
  });
}
