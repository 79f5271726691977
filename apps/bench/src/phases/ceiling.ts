import { freePort, withClient } from "@webhooks/testing";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { REDIS_URL, ROOT, RUN_PREFIX } from "../harness/config.ts";
import { cpuMsPer, describeCores, groupTarget, sharedTargets, startCpuWindow } from "../harness/cpu.ts";
import { freshDatabase } from "../harness/databases.ts";
import { type Service, serviceEnv, startProcess } from "../harness/processes.ts";
import { round, seconds } from "../harness/stats.ts";
import { within } from "../harness/time.ts";
import type { Context, WorkerSetup } from "../phase.ts";

/** A fixed, valid secret: the ceiling's jobs are signed like real deliveries, and verified. */
const SECRET = `whsec_${Buffer.alloc(32, 7).toString("base64")}`;
let runs = 0;

export type CeilingRun = Awaited<ReturnType<typeof measureCeiling>>;

/**
 * The bare ceiling: ceiling-worker.ts at `setup`, on the product's machine, receiver, queue, HTTP
 * client and driver. The clock runs from the paused queue's resumption (so start-up is not timed)
 * until the receiver has verified the last job's webhook.
 */
export async function measureCeiling(context: Context, setup: WorkerSetup, jobs: number) {
  const { receiver } = context;
  const database = await freshDatabase("ceiling");
  await withClient(database.url, async (db) => {
    await db.query(`CREATE TABLE ceiling_rows (id int PRIMARY KEY, status text NOT NULL DEFAULT 'queued',
      response_code int, attempts int NOT NULL DEFAULT 0, updated_at timestamptz NOT NULL DEFAULT now())`);
    await db.query("INSERT INTO ceiling_rows (id) SELECT generate_series(1, $1::int)", [jobs]);
    await db.query("VACUUM ANALYZE ceiling_rows");
  });
  const prefix = `${RUN_PREFIX}-ceiling-${++runs}`;
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null }).on("error", () => {}); // commands report failures
  // The product's job options: removed from Redis when done, like a delivery job.
  const queue = new Queue("deliveries", { connection: redis, prefix, defaultJobOptions: { removeOnComplete: true } });
  const workers: Service[] = [];
  try {
    await queue.pause();
    for (let start = 1; start <= jobs; start += 1_000) {
      const rows = Array.from({ length: Math.min(1_000, jobs - start + 1) }, (_, i) => start + i);
      await queue.addBulk(rows.map((row) => ({ name: "deliver", data: { row }, opts: { jobId: `job_${row}` } })));
    }
    receiver.useSecret("/ceiling", SECRET);
    receiver.resetCounts();
    const [script, url] = [`${ROOT}apps/bench/src/phases/ceiling-worker.ts`, `${receiver.url}/ceiling`];
    const ceilingEnv = {
      CEILING_CONCURRENCY: String(setup.concurrency),
      CEILING_SECRET: SECRET,
      CEILING_RECEIVER_URL: url,
    };
    for (let i = 1; i <= setup.workers; i++) {
      const port = String(await freePort());
      const env = serviceEnv(database.url, prefix, { ...ceilingEnv, PORT: port });
      workers.push(await startProcess(`worker-${i}`, script, env, `http://127.0.0.1:${port}`));
    }
    const endCpu = startCpuWindow(() => [
      ...workers.map((worker) => groupTarget(worker.name, worker.processGroup)),
      ...sharedTargets(database.name),
    ]);
    const [done, started] = [receiver.whenVerified(jobs), performance.now()];
    await queue.resume();
    const finishedAt = await within(done, 120_000);
    const cpu = endCpu();
    const elapsed = ((finishedAt ?? performance.now()) - started) / 1000;
    const completed = finishedAt === undefined ? receiver.verified : jobs;
    console.log(`  bare ceiling, ${setup.workers} x ${setup.concurrency}: ${round(completed / elapsed)}/s`);
    const [timedOut, perSecond, invalid] = [finishedAt === undefined, completed / elapsed, receiver.invalid];
    return { ...setup, jobs: completed, seconds: elapsed, perSecond, timedOut, invalid, cpu };
  } finally {
    await Promise.all(workers.map((worker) => worker.stop()));
    await queue.close();
    redis.disconnect();
  }
}

export function ceilingRecord(c: CeilingRun): Record<string, string> {
  return {
    setup: `${c.workers} x ${c.concurrency}`,
    "jobs/s": `${round(c.perSecond)}${c.timedOut ? " (timed out)" : ""}`,
    jobs: `${round(c.jobs)} in ${seconds(c.seconds)}, ${c.invalid} invalid signatures`,
    "ms of CPU per job": cpuMsPer(c.cpu, c.jobs).toFixed(2),
    "CPU (cores)": describeCores(c.cpu),
  };
}
