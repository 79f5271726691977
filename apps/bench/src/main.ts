// `npm run bench`: end-to-end throughput, publish -> receive latency, list latency on 1M rows, the
// bare ceiling, a healthy endpoint beside failing ones, a backlog of 1M deliveries, fan-out to 10,000
// subscriptions and retention on 10M deliveries, against local PostgreSQL and Redis.
// Writes BENCHMARKS.md at the repository root. Everything it starts or creates is stopped or
// deleted at the end, also on error or Ctrl-C.
// `npm run bench -- --only noisy` runs phase 5 alone, `--only throughput` phase 1 (one setup) and the
// ceiling, `--only list` phase 3, `--only backlog` phase 6, `--only fanout` phase 7, `--only retention`
// phase 8, for development: they print their figures and leave BENCHMARKS.md as it is.
// `--profile` adds the CPU profiles (a shorter, profiled run of phase 1, and the API serving phase 3's
// requests) and the report's sections on where the time goes; without it they are skipped, as
// profiling takes minutes and its figures are not results.
import { parseArgs } from "node:util";
import { checkPostgres } from "@webhooks/db";
import { checkRedis } from "@webhooks/queue";
import { measureBacklog } from "./backlog.ts";
import { measureCeiling } from "./ceiling.ts";
import { fanOutVerdicts, measureFanOut } from "./fanout.ts";
import { cleanUpOnSignals, onCleanup, runCleanup } from "./cleanup.ts";
import { deleteRunKeys, dropDatabase } from "./databases.ts";
import { measureLatency } from "./latency.ts";
import { measureListLatency } from "./list-latency.ts";
import { profileThroughput, type Profiles } from "./profiling.ts";
import { backlogSection, backlogVerdicts, retentionSection, retentionVerdicts } from "./report-scale.ts";
import { measureRetention } from "./retention-load.ts";
import { Receiver } from "./receiver.ts";
import { describeMachine } from "./machine.ts";
import { measureNoisyNeighbour } from "./noisy-neighbour.ts";
import { noisySection, noisyVerdicts, verdicts, writeReport, type SkippedSetup } from "./report.ts";
import { ROOT } from "./services.ts";
import { ADMIN_DATABASE_URL, DATABASES, REDIS_URL, RUN_PREFIX, settings } from "./settings.ts";
import { connectionShortfall, measureThroughput, type ThroughputResult } from "./throughput.ts";

const PHASES = ["noisy", "throughput", "list", "backlog", "fanout", "retention"] as const;

async function main(): Promise<void> {
  const { values: args } = parseArgs({ options: { only: { type: "string" }, profile: { type: "boolean", default: false } } });
  if (args.only !== undefined && !(PHASES as readonly string[]).includes(args.only)) {
    throw new Error(`--only ${args.only}: the phases that run alone are ${PHASES.join(", ")}`);
  }
  const startedAt = new Date();
  const unreachable = (await checkPostgres(ADMIN_DATABASE_URL)) ?? (await checkRedis(REDIS_URL));
  if (unreachable) throw new Error(unreachable);
  const host = await describeMachine();
  console.log(`bench ${RUN_PREFIX}: ${host.cores} cores, Node ${host.node}, ${host.postgres}, Redis ${host.redis}, ${startedAt.toISOString()}`);

  // Registered first, so that it runs last: after every process that could add keys has stopped.
  onCleanup("delete this run's Redis keys", async () => void (await deleteRunKeys()));
  // A run that was killed may have left its databases behind. (Phases 6 and 8 alone use none of
  // them, and must not end another benchmark's run on this server that does.)
  if (args.only !== "backlog" && args.only !== "retention") {
    for (const name of Object.values(DATABASES)) await dropDatabase(name);
  }

  const receiver = await new Receiver().start();

  if (args.only === "noisy") {
    console.log("5. noisy neighbour (alone, for development; BENCHMARKS.md is not written)");
    const noisy = await measureNoisyNeighbour(receiver);
    console.log(`\n${noisySection(noisy, host.cores).join("\n\n")}\n`);
    printVerdicts(noisyVerdicts(noisy));
    return;
  }

  if (args.only === "list") {
    console.log("3. list latency on 1M rows (alone, for development; BENCHMARKS.md is not written)");
    await measureListLatency({ profile: args.profile });
    return;
  }

  if (args.only === "backlog") {
    console.log("6. a backlog of 1,000,000 queued deliveries (alone, for development; BENCHMARKS.md is not written)");
    const backlog = await measureBacklog(receiver, { workers: 1, concurrency: 100 });
    console.log(`\n${backlogSection(backlog).join("\n\n")}\n`);
    printVerdicts(backlogVerdicts(backlog));
    return;
  }

  if (args.only === "fanout") {
    console.log("7. fan-out: one event to 10,000 subscriptions (alone, for development; BENCHMARKS.md is not written)");
    printVerdicts(fanOutVerdicts(await measureFanOut(receiver, { workers: 1, concurrency: 100 })));
    return;
  }

  if (args.only === "retention") {
    console.log("8. retention: publish and list latency on 10,000,000 deliveries, without and with a pruning pass (alone, for development; BENCHMARKS.md is not written)");
    const retention = await measureRetention(receiver);
    console.log(`\n${retentionSection(retention).join("\n\n")}\n`);
    printVerdicts(retentionVerdicts(retention));
    return;
  }

  if (args.only === "throughput") {
    console.log("1. end-to-end throughput (alone, for development; BENCHMARKS.md is not written)");
    const setup = { workers: 1, concurrency: 100 };
    const w10 = await measureThroughput(receiver, setup, { workload: "W10" });
    const w1 = await measureThroughput(receiver, setup, { workload: "W1" });
    const ceiling = await measureCeiling(receiver, setup);
    console.log(`  W10 ${Math.round(w10.perSecond)}/s, W1 ${Math.round(w1.perSecond)}/s, bare ceiling ${Math.round(ceiling.perSecond)}/s`);
    return;
  }

  console.log("1. end-to-end throughput: W10 (each event to 10 subscriptions), then W1 (each event to one)");
  const throughput: ThroughputResult[] = [];
  const skipped: SkippedSetup[] = [];
  for (const workload of ["W10", "W1"] as const) {
    for (const setup of settings.throughput.configurations) {
      const problem = await connectionShortfall(setup);
      if (problem) {
        if (workload === "W10") console.log(`  ${setup.workers} worker(s) x concurrency ${setup.concurrency}: skipped: ${problem}`);
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

  console.log("2. publish -> receive latency");
  const latency = await measureLatency(receiver, setup, settings.latency.ratePerSecond);
  const latencyBelowCapacity = await measureLatency(receiver, setup, settings.latency.diagnosticRatePerSecond);

  let profiles: Profiles | undefined;
  if (args.profile) {
    console.log("   profiling a shorter run of phase 1 (not a result)");
    profiles = await profileThroughput(receiver, setup);
  }

  console.log("3. GET /v1/deliveries on 1,000,000 rows");
  const list = await measureListLatency({ profile: args.profile });

  console.log("5. noisy neighbour: one healthy endpoint beside failing ones, at default settings");
  const noisy = await measureNoisyNeighbour(receiver);

  console.log("7. fan-out: one event to 10,000 subscriptions");
  const fanOut = await measureFanOut(receiver, setup);

  console.log(`6. a backlog of 1,000,000 queued deliveries (${setup.workers} x ${setup.concurrency}, like the best setup)`);
  const backlog = await measureBacklog(receiver, setup);

  console.log("8. retention: publish and list latency on 10,000,000 deliveries, without and with a pruning pass");
  const retention = await measureRetention(receiver);

  const results = { startedAt, finishedAt: new Date(), machine: host, throughput, skipped, best, bestW1, ceiling, latency, latencyBelowCapacity, list, profiles, noisy, fanOut, backlog, retention };
  const path = `${ROOT}BENCHMARKS.md`;
  writeReport(path, results);
  printVerdicts(verdicts(results));
  console.log(`\nWritten to ${path}`);
}

function printVerdicts(list: ReturnType<typeof verdicts>): void {
  console.log("\nResults against the targets:");
  for (const verdict of list) {
    console.log(`  ${verdict.met ? "met    " : "MISSED "} ${verdict.figure}: ${verdict.measured} (target ${verdict.target})`);
  }
}

cleanUpOnSignals();
let exitCode = 0;
try {
  await main();
} catch (error) {
  console.error(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  exitCode = 1;
} finally {
  console.log("cleaning up: stopping services, dropping databases, deleting Redis keys");
  await runCleanup();
}
// Nothing should be left running, but a stray handle must not keep `npm run bench` from ending.
process.exit(exitCode);
