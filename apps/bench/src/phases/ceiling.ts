import { freePort, type TestReceiver, withClient } from "@webhooks/testing";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { type CpuUsage, postgresTarget, startCpuWindow } from "../cpu-usage.ts";
import { freshDatabase } from "../databases.ts";
import { ROOT, type Service, serviceEnv, startProcess } from "../services.ts";
import { DATABASES, REDIS_URL, RUN_PREFIX, settings } from "../settings.ts";
import type { WorkerSetup } from "./throughput.ts";

export interface CeilingResult extends WorkerSetup {
  jobs: number;
  seconds: number;
  perSecond: number;
  invalidSignatures: number;
  rowsUpdated: number;
  timedOut: boolean;
  cpu: CpuUsage;
}

/** A fixed, valid secret: the ceiling's jobs are signed like real deliveries, and verified. */
const CEILING_SECRET = `whsec_${Buffer.alloc(32, 7).toString("base64")}`;

/**
 * Phase 4: the bare ceiling. The same machine, receiver, queue library, HTTP client and database
 * driver as the product, with nothing else: jobs are pre-enqueued with addBulk, then the
 * ceiling-worker processes (as many, with the same concurrency and the same number of database
 * connections, as the product's best setup) are told to start, and the clock runs until the
 * receiver has verified the last job's webhook.
 */
export async function measureCeiling(receiver: TestReceiver, setup: WorkerSetup): Promise<CeilingResult> {
  const jobs = settings.ceiling.jobs;
  const databaseUrl = await freshDatabase(DATABASES.main);
  await withClient(databaseUrl, async (db) => {
    await db.query(`CREATE TABLE ceiling_rows (
      id int PRIMARY KEY, status text NOT NULL DEFAULT 'queued', response_code int, attempts int NOT NULL DEFAULT 0,
      updated_at timestamptz NOT NULL DEFAULT now())`);
    await db.query("INSERT INTO ceiling_rows (id) SELECT generate_series(1, $1::int)", [jobs]);
    await db.query("VACUUM ANALYZE ceiling_rows");
  });

  const prefix = `${RUN_PREFIX}-ceiling`;
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  redis.on("error", () => {}); // failures surface through the commands' own errors
  // The product's job options: removed from Redis on completion, like a delivery job.
  const queue = new Queue("deliveries", {
    connection: redis,
    prefix,
    defaultJobOptions: { removeOnComplete: true, removeOnFail: true },
  });
  const workers: Service[] = [];
  try {
    for (let start = 1; start <= jobs; start += 1_000) {
      const rows = Array.from({ length: Math.min(1_000, jobs - start + 1) }, (_, i) => start + i);
      await queue.addBulk(rows.map((row) => ({ name: "deliver", data: { row }, opts: { jobId: `job_${row}` } })));
    }
    const path = "/ceiling";
    receiver.useSecret(path, CEILING_SECRET);
    receiver.resetCounts();

    const ports: number[] = [];
    for (let i = 0; i < setup.workers; i++) {
      const port = await freePort();
      ports.push(port);
      const env = serviceEnv(databaseUrl, prefix, {
        CEILING_PORT: String(port),
        CEILING_CONCURRENCY: String(setup.concurrency),
        CEILING_RECEIVER_URL: `${receiver.url}${path}`,
        CEILING_SECRET,
      });
      workers.push(
        await startProcess(
          `ceiling-worker-${i + 1}`,
          `${ROOT}apps/bench/src/ceiling-worker.ts`,
          env,
          `http://127.0.0.1:${port}/healthz`,
        ),
      );
    }

    const endCpuWindow = startCpuWindow([
      ...workers.map((worker) => ({ label: worker.name, processGroup: worker.processGroup })),
      postgresTarget(Object.values(DATABASES)),
      { label: "redis", command: "redis-server" },
      { label: "bench (receiver)", pid: process.pid },
    ]);
    const started = performance.now();
    const done = receiver.whenVerified(jobs);
    await Promise.all(ports.map((port) => fetch(`http://127.0.0.1:${port}/start`, { method: "POST" })));
    let timer: NodeJS.Timeout | undefined;
    const finishedAt = await Promise.race([
      done,
      new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), settings.ceiling.timeoutMs))),
    ]);
    clearTimeout(timer);
    const cpu = endCpuWindow();
    const seconds = ((finishedAt ?? performance.now()) - started) / 1000;
    const completed = finishedAt === undefined ? receiver.verified : jobs;

    await new Promise((resolve) => setTimeout(resolve, 500));
    const rowsUpdated = await withClient(databaseUrl, async (db) => {
      const { rows } = await db.query<{ count: number }>(
        "SELECT count(*)::int AS count FROM ceiling_rows WHERE status = 'delivered'",
      );
      return rows[0]?.count ?? 0;
    });
    const result: CeilingResult = {
      ...setup,
      jobs: completed,
      seconds,
      perSecond: completed / seconds,
      invalidSignatures: receiver.invalid,
      rowsUpdated,
      timedOut: finishedAt === undefined,
      cpu,
    };
    console.log(
      `  ceiling, ${setup.workers} process(es) x concurrency ${setup.concurrency}: ${completed} jobs in ${seconds.toFixed(2)} s = ` +
        `${Math.round(result.perSecond)}/s; invalid signatures ${receiver.invalid}; rows updated ${rowsUpdated}`,
    );
    return result;
  } finally {
    await Promise.all(workers.map((worker) => worker.stop()));
    await queue.close();
    redis.disconnect();
  }
}
