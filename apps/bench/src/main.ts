// `npm run bench`: end-to-end throughput, publish -> receive latency, list latency on 1M rows, the
// bare ceiling, a healthy endpoint beside failing ones, a backlog of 1M deliveries, fan-out to 10,000
// subscriptions and retention on 10M deliveries, against local PostgreSQL and Redis (full-run.ts;
// each phase's code is in phases/). Writes BENCHMARKS.md at the repository root. Everything it
// starts or creates is stopped or deleted at the end, also on error or Ctrl-C (cleanup.ts).
// `npm run bench -- --only noisy` runs phase 5 alone, `--only throughput` phase 1 (one setup) and the
// ceiling, `--only w1` phase 4b (W1 and the ceiling back to back, in rounds), `--only list` phase 3,
// `--only backlog` phase 6, `--only fanout` phase 7, `--only retention` phase 8, for development
// (phase-registry.ts): they print their figures and leave BENCHMARKS.md as it is.
// `--profile` adds the CPU profiles (profiling/: a shorter, profiled run of phase 1, and the API serving
// phase 3's requests) and the report's sections on where the time goes; without it they are skipped,
// as profiling takes minutes and its figures are not results. `--only throughput --baseline <dir>`
// runs phase 1 alternately with this checkout's services and with those of <dir>, a checkout of the
// code from before endpoint isolation (phases/isolation-cost.ts).
import { parseArgs } from "node:util";
import { checkPostgres } from "@webhooks/db";
import { checkRedis } from "@webhooks/queue";
import { startReceiver } from "@webhooks/testing";
import { cleanUpOnSignals, onCleanup, runCleanup } from "./cleanup.ts";
import { deleteRunKeys, dropDatabase } from "./databases.ts";
import { runAllPhases } from "./full-run.ts";
import { describeMachine } from "./machine.ts";
import { ALONE_PHASES, isAlonePhase } from "./phase-registry.ts";
import { printVerdicts, verdicts, writeReport } from "./report.ts";
import { ROOT } from "./services.ts";
import { ADMIN_DATABASE_URL, DATABASES, REDIS_URL, RUN_PREFIX } from "./settings.ts";

async function main(): Promise<void> {
  const { values: args } = parseArgs({
    options: { only: { type: "string" }, profile: { type: "boolean", default: false }, baseline: { type: "string" } },
  });
  const only = args.only;
  if (only !== undefined && !isAlonePhase(only)) {
    throw new Error(`--only ${only}: the phases that run alone are ${Object.keys(ALONE_PHASES).join(", ")}`);
  }
  if (args.baseline !== undefined && (only !== "throughput" || args.profile)) {
    throw new Error("--baseline goes with --only throughput, without --profile");
  }
  const alone = only === undefined ? undefined : ALONE_PHASES[only];
  const startedAt = new Date();
  const unreachable = (await checkPostgres(ADMIN_DATABASE_URL)) ?? (await checkRedis(REDIS_URL));
  if (unreachable) throw new Error(unreachable);
  const host = await describeMachine();
  console.log(
    `bench ${RUN_PREFIX}: ${host.cores} cores, Node ${host.node}, ${host.postgres}, Redis ${host.redis}, ${startedAt.toISOString()}`,
  );

  // Registered first, so that it runs last: after every process that could add keys has stopped.
  onCleanup("delete this run's Redis keys", async () => void (await deleteRunKeys()));
  // A run that was killed may have left its databases behind. (Phases 6 and 8 alone use none of
  // them, and must not end another benchmark's run on this server that does.)
  if (alone?.usesFixedDatabases ?? true) {
    for (const name of Object.values(DATABASES)) await dropDatabase(name);
  }

  // Verifies every signature with core's signing and only counts (@webhooks/testing's receiver, in
  // its mode for thousands of requests per second); keep-alive well past the worker's idle gaps, as
  // a real receiver behind a load balancer would.
  const receiver = await startReceiver(undefined, { verifyWith: "core", record: false, keepAliveTimeoutMs: 60_000 });
  onCleanup("close the receiver", () => receiver.close());
  const context = { receiver, host, profile: args.profile, baseline: args.baseline };
  if (alone) {
    console.log(`${alone.title} (alone, for development; BENCHMARKS.md is not written)`);
    await alone.run(context);
    return;
  }

  const results = await runAllPhases(context, startedAt);
  const path = `${ROOT}BENCHMARKS.md`;
  writeReport(path, results);
  printVerdicts(verdicts(results));
  console.log(`\nWritten to ${path}`);
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
