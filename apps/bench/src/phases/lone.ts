import { withClient } from "@webhooks/testing";
import { cpuMsPer, describeCores, PROCESSES } from "../harness/cpu.ts";
import { startEndpoint } from "../harness/endpoint.ts";
import { type LatencyRun, measureLatency } from "../harness/open-loop.ts";
import { pipelineSubscription, pipelineWorkerEnv, startStack } from "../harness/stack.ts";
import { deliveredOf, latencies, ms } from "../harness/stats.ts";
import { atScale, check, definePhase, table } from "../phase.ts";
import { seedLog } from "./log-seed.ts";
import { THROUGHPUT } from "./throughput.ts";

const SETTINGS = {
  full: { warmupMs: 2_000, durationMs: 10_000, drainMs: 60_000, history: THROUGHPUT.full.history },
  quick: { warmupMs: 1_000, durationMs: 3_000, drainMs: 20_000, history: THROUGHPUT.quick.history },
};
/** The checked rate, then one well below capacity for reference. */
const RATES = [500, 100];
const TARGETS = { p50Ms: 10, p99Ms: 50, cpuMsPerEvent: 1.5 };

type LoneRun = LatencyRun & { ratePerSecond: number };

/**
 * Publish -> receive at a steady rate, open loop, each event its own request to one subscription:
 * the shape of production traffic, on the throughput phase's seeded, analyzed history (an empty
 * log, never analyzed, is planned as a tiny table). After a warm-up at the same rate, every event's
 * latency runs from its due time to its verified receipt, and the CPU of every process over the run
 * is divided by the events sent in it. With --endpoint-auth or --egress-proxy, its endpoint demands
 * that credential, or its workers send through the proxy (harness/endpoint.ts).
 */
export const lonePhase = definePhase<{ runs: LoneRun[]; endpoint: string[] }>({
  name: "lone",
  title: "Lone events: publish -> receive and CPU per event, open loop",
  summary: "500 events/s (and 100/s for reference), each its own request to one subscription: latency, CPU per event",
  async run(context) {
    const { warmupMs, durationMs, drainMs, history } = atScale(context.scale, SETTINGS);
    const setup = context.best.W10;
    const [workerEnv, endpoint] = [pipelineWorkerEnv(setup), await startEndpoint(context)];
    const stack = await startStack(context, "lone", { workers: setup.workers, workerEnv, connections: 64, endpoint });
    try {
      await withClient(stack.database.url, (db) => seedLog(db, { deliveries: history, queued: 0, retrying: 0 }));
      const runs: LoneRun[] = [];
      for (const ratePerSecond of RATES) {
        const type = `lone.r${ratePerSecond}`;
        await stack.subscribe(`/lone/${ratePerSecond}`, [type], pipelineSubscription(setup));
        await measureLatency(stack, { type, ratePerSecond, durationMs: warmupMs, drainMs });
        const run = await measureLatency(stack, { type, ratePerSecond, durationMs, drainMs });
        const cpu = cpuMsPer(run.cpu, run.sent).toFixed(2);
        console.log(`  ${ratePerSecond}/s: p50 ${ms(run.endToEnd.p50)}, ${cpu} ms of CPU per event`);
        runs.push({ ...run, ratePerSecond });
      }
      return { runs, endpoint: endpoint.describe() };
    } finally {
      await stack.stop();
    }
  },
  report({ runs, endpoint }) {
    const target = runs[0]!;
    const complete = target.delivered === target.sent;
    const cpuPerEvent = cpuMsPer(target.cpu, target.sent);
    const [{ p50, p99 }, at] = [target.endToEnd, `${target.ratePerSecond} events/s`];
    return {
      tables: [
        table(
          ["Latency from the due time (p50 / p99 / max); CPU over the run, per event sent", ...endpoint].join("; "),
          runs.map((r) => ({
            rate: `${r.ratePerSecond}/s`,
            delivered: deliveredOf(r),
            "publish -> receive": latencies(r.endToEnd),
            "until the 202": latencies(r.accepted),
            "from the 202 to receipt": latencies(r.afterAccepted),
            "ms of CPU per event, all but the bench": cpuMsPer(r.cpu, r.sent).toFixed(2),
            "by process": PROCESSES.map((p) => `${p} ${cpuMsPer(r.cpu, r.sent, [p]).toFixed(2)}`).join(", "),
            "CPU (cores)": describeCores(r.cpu),
          })),
        ),
      ],
      checks: [
        check(`Publish -> receive p50 at ${at}`, ms(p50), `<= ${TARGETS.p50Ms} ms`, p50 <= TARGETS.p50Ms && complete),
        check(`Publish -> receive p99 at ${at}`, ms(p99), `<= ${TARGETS.p99Ms} ms`, p99 <= TARGETS.p99Ms && complete),
        check(
          `CPU per event at ${at} (API, workers, PostgreSQL, Redis)`,
          `${cpuPerEvent.toFixed(2)} ms`,
          `<= ${TARGETS.cpuMsPerEvent} ms`,
          cpuPerEvent <= TARGETS.cpuMsPerEvent,
        ),
      ],
    };
  },
});
