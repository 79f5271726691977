import type { RunContext } from "./phase-registry.ts";
import { measureBacklog } from "./phases/backlog.ts";
import { measureCeiling } from "./phases/ceiling.ts";
import { measureFanOut } from "./phases/fanout.ts";
import { measureLatency } from "./phases/latency.ts";
import { measureListLatency } from "./phases/list-latency.ts";
import { measureNoisyNeighbour } from "./phases/noisy-neighbour.ts";
import { measureRetention } from "./phases/retention-load.ts";
import { connectionShortfall, measureThroughput, type ThroughputResult } from "./phases/throughput.ts";
import { measureW1Share } from "./phases/w1-share.ts";
import { type Profiles, profileThroughput } from "./profiling/profiling.ts";
import type { BenchResults, SkippedSetup } from "./report.ts";
import { settings } from "./settings.ts";

/**
 * Every phase, in an order where each can use what an earlier one found: phase 1 picks the best
 * worker setup, which phases 2, 4, 6 and 7 then use, and W1's best setup, which 4b uses. With
 * `profile`, a shorter profiled run of phase 1 follows phase 2 (its figures are not results).
 */
export async function runAllPhases({ receiver, host, profile }: RunContext, startedAt: Date): Promise<BenchResults> {
  console.log("1. end-to-end throughput: W10 (each event to 10 subscriptions), then W1 (each event to one)");
  const throughput: ThroughputResult[] = [];
  const skipped: SkippedSetup[] = [];
  for (const workload of ["W10", "W1"] as const) {
    for (const setup of settings.throughput.configurations) {
      const problem = await connectionShortfall(setup);
      if (problem) {
        if (workload === "W10")
          console.log(`  ${setup.workers} worker(s) x concurrency ${setup.concurrency}: skipped: ${problem}`);
        if (workload === "W10") skipped.push({ ...setup, reason: problem });
        continue;
      }
      throughput.push(await measureThroughput(receiver, setup, { workload }));
    }
  }
  const bestOf = (workload: string) =>
    throughput.filter((t) => t.workload === workload && !t.timedOut).sort((a, b) => b.perSecond - a.perSecond)[0] ??
    throughput.find((t) => t.workload === workload);
  const best = bestOf("W10");
  const bestW1 = bestOf("W1");
  if (!best || !bestW1) throw new Error("no throughput setup could be run");
  const setup = { workers: best.workers, concurrency: best.concurrency };

  console.log(`4. bare ceiling (${setup.workers} x ${setup.concurrency}, like the best setup)`);
  const ceiling = await measureCeiling(receiver, setup);

  const w1Setup = { workers: bestW1.workers, concurrency: bestW1.concurrency };
  console.log(
    `4b. W1 against the bare ceiling, back to back, ${settings.w1Share.rounds} rounds (${w1Setup.workers} x ${w1Setup.concurrency}, W1's best setup)`,
  );
  const w1Share = await measureW1Share(receiver, w1Setup);

  console.log("2. publish -> receive latency");
  const latency = await measureLatency(receiver, setup, settings.latency.ratePerSecond);
  const latencyBelowCapacity = await measureLatency(receiver, setup, settings.latency.diagnosticRatePerSecond);

  let profiles: Profiles | undefined;
  if (profile) {
    console.log("   profiling a shorter run of phase 1 (not a result)");
    profiles = await profileThroughput(receiver, setup);
  }

  console.log("3. GET /v1/deliveries on 1,000,000 rows");
  const list = await measureListLatency({ profile });

  console.log("5. noisy neighbour: one healthy endpoint beside failing ones, at default settings");
  const noisy = await measureNoisyNeighbour(receiver);

  console.log("7. fan-out: one event to 10,000 subscriptions");
  const fanOut = await measureFanOut(receiver, setup);

  console.log(
    `6. a backlog of 1,000,000 queued deliveries (${setup.workers} x ${setup.concurrency}, like the best setup)`,
  );
  const backlog = await measureBacklog(receiver, setup);

  console.log("8. retention: publish and list latency on 10,000,000 deliveries, without and with a pruning pass");
  const retention = await measureRetention(receiver);

  return {
    startedAt,
    finishedAt: new Date(),
    machine: host,
    throughput,
    skipped,
    best,
    bestW1,
    ceiling,
    w1Share,
    latency,
    latencyBelowCapacity,
    list,
    profiles,
    noisy,
    fanOut,
    backlog,
    retention,
  };
}
