import { withClient } from "@webhooks/testing";
import { ADMIN_DATABASE_URL } from "../harness/config.ts";
import { type CpuUsage, cpuMsPer, describeCores, PROCESSES } from "../harness/cpu.ts";
import { pipelineSubscription, pipelineWorkerEnv, startStack } from "../harness/stack.ts";
import { pct, round, seconds } from "../harness/stats.ts";
import { waitUntil, within } from "../harness/time.ts";
import { atScale, type Context, definePhase, table, type WorkerSetup } from "../phase.ts";
import { ceilingRecord, measureCeiling } from "./ceiling.ts";
import { seedLog } from "./log-seed.ts";

/** W10: every event to all 10 subscriptions. W1: each to one of them, an event per delivery. */
type Workload = "W10" | "W1";

const SETUPS = [
  { workers: 1, concurrency: 50 },
  { workers: 1, concurrency: 100 },
  { workers: 2, concurrency: 25 },
  { workers: 2, concurrency: 50 },
];
/** `history`: deliveries already in the log (of other subscriptions) when a run starts. */
export const THROUGHPUT = {
  full: { deliveries: 20_000, history: 50_000, setups: SETUPS, ceilingJobs: 20_000 },
  quick: { deliveries: 2_000, history: 5_000, setups: [{ workers: 1, concurrency: 100 }], ceilingJobs: 2_000 },
};
const SUBSCRIPTIONS = 10;
/** Kept in flight by closed-loop publishers: 16 requests of 10 deliveries in W10, 160 of one in W1. */
const DELIVERIES_IN_FLIGHT = 160;
const TARGETS = { perSecond: 3_000, shareOfCeiling: 0.5 };
const setupText = (s: WorkerSetup) => `${s.workers} x ${s.concurrency}`;
let runs = 0;

export type ThroughputRun = Awaited<ReturnType<typeof measureThroughput>>;

/**
 * End-to-end deliveries per second on a fresh database with a seeded, analyzed history, published
 * by closed-loop clients: from the first publish until the receiver has verified the last delivery,
 * then until PostgreSQL has recorded them all as delivered.
 */
export async function measureThroughput(context: Context, setup: WorkerSetup, workload: Workload, schemas = false) {
  const { deliveries, history } = atScale(context.scale, THROUGHPUT);
  const [run, publishers] = [++runs, DELIVERIES_IN_FLIGHT / (workload === "W10" ? SUBSCRIPTIONS : 1)];
  const typeOf = (i: number) => (workload === "W10" ? "invoice.paid" : `invoice.paid.s${i % SUBSCRIPTIONS}`);
  const workerEnv = pipelineWorkerEnv(setup);
  const stack = await startStack(context, "throughput", { workers: setup.workers, workerEnv, connections: publishers });
  const { receiver } = context;
  try {
    for (let i = 0; i < SUBSCRIPTIONS; i++) {
      await stack.subscribe(`/t${run}/s${i}`, [typeOf(i)], pipelineSubscription(setup));
      // With `schemas`, each type in the catalog with a JSON Schema that every publish is checked against.
      if (schemas) await stack.client.request("POST", "/v1/event-types", eventType(typeOf(i)), 201);
    }
    const seededBefore = await withClient(stack.database.url, async (db) => {
      await seedLog(db, { deliveries: history, queued: 0, retrying: 0 });
      return (await db.query<{ now: Date }>("SELECT now()")).rows[0]!.now;
    });
    receiver.resetCounts();
    const [endCpu, started, allReceived] = [stack.cpuWindow(), performance.now(), receiver.whenVerified(deliveries)];
    const events = workload === "W10" ? deliveries / SUBSCRIPTIONS : deliveries;
    let [next, rejected] = [0, 0];
    const publisher = async () => {
      for (let seq = next++; seq < events; seq = next++) {
        if ((await stack.client.publish(typeOf(seq), { invoice: `in_${run}_${seq}` })) !== 202) rejected++;
      }
    };
    const publishing = Promise.all(Array.from({ length: publishers }, publisher));
    const finishedAt = await within(allReceived, 90_000);
    const cpu = endCpu();
    await publishing;
    const [elapsed, delivered] = [((finishedAt ?? performance.now()) - started) / 1000, receiver.verified];
    const sql = "SELECT count(*)::int AS n FROM deliveries WHERE created_at > $1 AND status = 'delivered'";
    const recorded = await withClient(stack.database.url, (db) =>
      waitUntil(async () => (await db.query<{ n: number }>(sql, [seededBefore])).rows[0]!.n === deliveries, 15_000),
    );
    const recordedSeconds = recorded ? (performance.now() - started) / 1000 : undefined;
    console.log(`  ${workload}, ${setupText(setup)}: ${round(delivered / elapsed)}/s`);
    const [timedOut, perSecond, { invalid, duplicates }] = [finishedAt === undefined, delivered / elapsed, receiver];
    const outcome = { timedOut, rejected, invalid, duplicates, recordedSeconds, cpu };
    return { ...setup, workload, publishers, delivered, seconds: elapsed, perSecond, ...outcome };
  } finally {
    await stack.stop();
  }
}

/** A catalog entry whose schema the publishes' data (`{ invoice: "in_<run>_<seq>" }`) meets. */
const invoice = { type: "string", pattern: "^in_[0-9]+_[0-9]+$", maxLength: 64 };
const eventType = (name: string) => ({
  name,
  schema: { type: "object", required: ["invoice"], properties: { invoice } },
});

/** Why a setup cannot run here, if it cannot: at 10 connections a process, it could exhaust max_connections. */
async function connectionShortfall(setup: WorkerSetup): Promise<string | undefined> {
  const needed = setup.workers * 10 + 10 + 5;
  const sql = `SELECT current_setting('max_connections')::int AS max,
                 (SELECT count(*)::int FROM pg_stat_activity WHERE backend_type = 'client backend') AS used`;
  const { rows } = await withClient(ADMIN_DATABASE_URL, (db) => db.query<{ max: number; used: number }>(sql));
  const { max, used } = rows[0]!;
  return needed <= max - used ? undefined : `needs ${needed} connections; ${used} of ${max} in use`;
}

export const throughputPhase = definePhase({
  name: "throughput",
  title: "Throughput: W10 and W1, and the bare ceiling",
  summary: "end-to-end deliveries/s for each worker setup, then the bare BullMQ + undici + pg loop at the best one",
  async run(context) {
    const s = atScale(context.scale, THROUGHPUT);
    const [runs, skipped]: [ThroughputRun[], string[]] = [[], []];
    for (const setup of s.setups) {
      const reason = await connectionShortfall(setup);
      if (reason) skipped.push(`${setupText(setup)}: ${reason}`);
      else for (const workload of ["W10", "W1"] as const) runs.push(await measureThroughput(context, setup, workload));
    }
    const bestOf = (workload: Workload) => {
      const ranked = runs.filter((r) => r.workload === workload).sort((a, b) => b.perSecond - a.perSecond);
      const best = ranked.find((r) => !r.timedOut) ?? ranked[0];
      if (!best) throw new Error(`no worker setup could run on this PostgreSQL server (${skipped.join("; ")})`);
      return best;
    };
    const best = { W10: bestOf("W10"), W1: bestOf("W1") };
    context.best = best;
    return { runs, skipped, best, ceiling: await measureCeiling(context, best.W10, s.ceilingJobs) };
  },
  report({ runs, skipped, best, ceiling }) {
    const share = best.W10.perSecond / ceiling.perSecond;
    const cpuRow = (run: string, cpu: CpuUsage, items: number) => ({
      run,
      ...Object.fromEntries(PROCESSES.map((p) => [p, cpuMsPer(cpu, items, [p]).toFixed(3)])),
      "all but the bench": cpuMsPer(cpu, items).toFixed(2),
    });
    const rows = runs.map((run) => ({
      workload: run.workload,
      setup: `${setupText(run)}${run === best[run.workload] ? " (best)" : ""}`,
      "deliveries/s": `${round(run.perSecond)}${run.timedOut ? " (timed out)" : ""} (${run.publishers} publishers)`,
      "all recorded in PostgreSQL": run.recordedSeconds ? `after ${seconds(run.recordedSeconds)}` : "**no**",
      "rejected / invalid signatures / duplicates": `${run.rejected} / ${run.invalid} / ${run.duplicates}`,
      "CPU (cores)": describeCores(run.cpu),
    }));
    return {
      tables: [
        table(
          `Deliveries per second, by workload and setup (workers x concurrency)${skipped.map((k) => `; not run: ${k}`).join("")}`,
          rows,
        ),
        table("The bare ceiling, at W10's best setup", [ceilingRecord(ceiling)]),
        table("ms of CPU per delivery (per job for the ceiling), by process", [
          cpuRow(`W10, ${setupText(best.W10)}`, best.W10.cpu, best.W10.delivered),
          cpuRow(`W1, ${setupText(best.W1)}`, best.W1.cpu, best.W1.delivered),
          cpuRow(`bare ceiling, ${setupText(ceiling)}`, ceiling.cpu, ceiling.jobs),
        ]),
      ],
      checks: [
        {
          figure: "End-to-end deliveries/s, W10 (best setup)",
          measured: `${round(best.W10.perSecond)}/s`,
          target: `>= ${round(TARGETS.perSecond)}/s`,
          met: best.W10.perSecond >= TARGETS.perSecond && !best.W10.timedOut,
        },
        {
          figure: "... as a share of the bare ceiling",
          measured: `${pct(share)} of ${round(ceiling.perSecond)}/s`,
          target: `>= ${pct(TARGETS.shareOfCeiling)}`,
          met: share >= TARGETS.shareOfCeiling && !ceiling.timedOut,
        },
      ],
    };
  },
});
