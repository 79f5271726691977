import { withClient } from "@webhooks/testing";
import type { ApiClient } from "../harness/api-client.ts";
import { type CpuUsage, describeCores } from "../harness/cpu.ts";
import { dropDatabase } from "../harness/databases.ts";
import { publishOpenLoop } from "../harness/open-loop.ts";
import { type Stack, startStack } from "../harness/stack.ts";
import { ms, round, seconds, summarize } from "../harness/stats.ts";
import { sleep } from "../harness/time.ts";
import { atScale, definePhase, table } from "../phase.ts";
import { seedLog } from "./log-seed.ts";

const SETTINGS = {
  full: { deliveries: 10_000_000, warmupMs: 10_000, windowMs: 45_000 },
  quick: { deliveries: 200_000, warmupMs: 3_000, windowMs: 10_000 },
};
/** Pruning windows keep this many days: 90% of the seeded log is older. */
const RETENTION_DAYS = 3;
const RATES = { publish: 100, list: 20 };
const TABLES = ["deliveries", "delivery_attempts", "events"];

type Window = Awaited<ReturnType<typeof runWindow>>;

/** Rows deleted so far, by table (a backend flushes its counters when it exits). */
async function deletedRows(databaseUrl: string): Promise<number[]> {
  const sql = "SELECT relname, n_tup_del::int AS n FROM pg_stat_user_tables WHERE relname = ANY($1)";
  const { rows } = await withClient(databaseUrl, (db) => db.query<{ relname: string; n: number }>(sql, [TABLES]));
  return TABLES.map((name) => rows.find((row) => row.relname === name)?.n ?? 0);
}

/**
 * Publishes open loop (latency from the due time to the 202) and lists one request at a time (from
 * the send to the whole response), both at their steady rates, for `durationMs`.
 */
async function runLoad(client: ApiClient, listPaths: string[], durationMs: number) {
  const listing = (async () => {
    const [latencies, started] = [[] as number[], performance.now()];
    let failures = 0;
    for (let i = 0; i < (durationMs / 1000) * RATES.list; i++) {
      await sleep(started + (i * 1000) / RATES.list - performance.now());
      const sent = performance.now();
      const reply = await client.request("GET", listPaths[i % listPaths.length]!).catch(() => undefined);
      if (reply?.status === 200) latencies.push(performance.now() - sent);
      else failures++;
    }
    return { latencies, failures };
  })();
  const publish = { type: "retention.load", ratePerSecond: RATES.publish, count: (durationMs / 1000) * RATES.publish };
  const { accepted } = await publishOpenLoop(client, publish, (seq, due) => ({ seq, due }));
  const list = await listing;
  const published = accepted.filter((lateness) => lateness !== undefined);
  const failures = list.failures + accepted.length - published.length;
  return { publish: summarize(published), list: summarize(list.latencies), failures };
}

/**
 * One window: a worker started with or without pruning, a warm-up that is not counted, then the
 * measured load; and the rows deleted while the worker ran, per second of its run, by table.
 */
async function runWindow(stack: Stack, listPaths: string[], label: string, pruning: boolean, s: typeof SETTINGS.full) {
  const env = { RETENTION: pruning ? `${RETENTION_DAYS}d` : "off", PRUNE_INTERVAL: "1s" };
  const [before, started] = [await deletedRows(stack.database.url), performance.now()];
  const worker = await stack.addWorker("worker", env);
  let measured: Awaited<ReturnType<typeof runLoad>> & { cpu: CpuUsage };
  try {
    await runLoad(stack.client, listPaths, s.warmupMs);
    const endCpu = stack.cpuWindow();
    measured = { ...(await runLoad(stack.client, listPaths, s.windowMs)), cpu: endCpu() };
  } finally {
    await worker.stop();
  }
  const after = await deletedRows(stack.database.url);
  const deletedPerSecond = after.map((n, i) => (n - before[i]!) / ((performance.now() - started) / 1000));
  console.log(`  ${label}: publish p99 ${ms(measured.publish.p99)}, list p99 ${ms(measured.list.p99)}`);
  return { label, pruning, ...measured, deletedPerSecond };
}

/** The pruning windows' mean p99 against the quiet ones' mean; the noise is the quiet ones' spread. */
function shift(windows: Window[], pick: (w: Window) => number) {
  const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;
  const quiet = windows.filter((w) => !w.pruning).map(pick);
  const [baseline, pruning] = [mean(quiet), mean(windows.filter((w) => w.pruning).map(pick))];
  const noise = quiet.length >= 2 ? Math.max(...quiet) - Math.min(...quiet) : Number.NaN;
  return { baseline, pruning, moved: pruning - baseline, noise };
}

/**
 * Does a pruning pass disturb the service? Windows with RETENTION=off and pruning ones
 * (PRUNE_INTERVAL=1s: it deletes throughout) take turns, quiet first and last: the quiet ones'
 * spread is the noise, and a drift of the host's speed is not charged to the pruner. Each window
 * begins after a CHECKPOINT, so none pays for the writes of the one before.
 */
export const retentionPhase = definePhase({
  name: "retention",
  title: "Retention: publish and list latency while pruning a large log",
  summary: "publish and list p99 on 10,000,000 deliveries, in windows without and with a pruning pass",
  async run(context) {
    const s = atScale(context.scale, SETTINGS);
    const stack = await startStack(context, "retention", { workers: 0, connections: 32 });
    const { url } = stack.database;
    try {
      const seeded = await withClient(url, (db) => seedLog(db, { deliveries: s.deliveries, queued: 0, retrying: 2 }));
      console.log(`  seeded ${round(seeded.deliveries)} deliveries in ${seconds(seeded.seconds)}`);
      await stack.subscribe("/retention", ["retention.load"]);
      // The seeded subscriptions' ids are older than the one just created.
      const { rows } = await withClient(url, (db) => db.query("SELECT min(id) AS id FROM subscriptions"));
      const subscription = `subscription_id=${rows[0].id}`;
      const queries = ["", `?${subscription}`, "?status=failed", `?${subscription}&status=failed`];
      const listPaths = queries.map((q) => `/v1/deliveries${q}`);
      const windows: Window[] = [];
      for (const [i, pruning] of [false, true, false, true, false].entries()) {
        await withClient(url, (db) => db.query("CHECKPOINT"));
        const label = `${i + 1}: ${pruning ? `pruning, RETENTION=${RETENTION_DAYS}d` : "without pruning"}`;
        windows.push(await runWindow(stack, listPaths, label, pruning, s));
      }
      return { seeded, windows };
    } finally {
      await stack.stop();
      await dropDatabase(stack.database.name); // many GB: free the disk at once
    }
  },
  report({ seeded, windows }) {
    const check = (what: string, pick: (w: Window) => number) => {
      const m = shift(windows, pick);
      return {
        figure: `${what} p99 with a pruning pass running, on ${round(seeded.deliveries)} deliveries`,
        measured: `${m.moved >= 0 ? "+" : ""}${ms(m.moved)} (${ms(m.pruning)} against ${ms(m.baseline)}); noise ${ms(m.noise)}`,
        target: "moved by no more than the noise",
        met: m.moved <= m.noise,
      };
    };
    const title =
      `${round(seeded.deliveries)} deliveries, ${round(seeded.attempts)} attempts, ${round(seeded.events)} events ` +
      `(${seeded.gigabytes.toFixed(1)} GB, seeded in ${seconds(seeded.seconds)}); RETENTION=${RETENTION_DAYS}d leaves 10%; ` +
      `publish open loop at ${RATES.publish}/s, list at ${RATES.list}/s`;
    return {
      tables: [
        table(
          title,
          windows.map((w) => ({
            window: w.label,
            "publish p50 / p99": `${ms(w.publish.p50)} / ${ms(w.publish.p99)}`,
            "list p50 / p99": `${ms(w.list.p50)} / ${ms(w.list.p99)}`,
            failures: String(w.failures),
            [`pruned per second: ${TABLES.join(", ")}`]: w.pruning ? w.deletedPerSecond.map(round).join(", ") : "-",
            "CPU (cores)": describeCores(w.cpu),
          })),
        ),
      ],
      checks: [check("Publish (to the 202)", (w) => w.publish.p99), check("GET /v1/deliveries", (w) => w.list.p99)],
    };
  },
});
