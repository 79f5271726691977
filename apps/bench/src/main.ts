// `npm run bench`: the phases of phases.ts against local PostgreSQL and Redis (`--help`). What it
// starts or creates is stopped or deleted at the end, also on error or Ctrl-C (harness/cleanup.ts).
import { writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { checkPostgres } from "@webhooks/db";
import { checkRedis } from "@webhooks/queue";
import { startReceiver } from "@webhooks/testing";
import { cleanUpOnSignals, onCleanup, runCleanup } from "./harness/cleanup.ts";
import { ADMIN_DATABASE_URL, REDIS_URL, RUN_PREFIX } from "./harness/config.ts";
import { deleteRunKeys, dropLeftoverDatabases } from "./harness/databases.ts";
import { describeMachine } from "./harness/machine.ts";
import { helpText, type Options, parseOptions, UsageError } from "./options.ts";
import type { Context } from "./phase.ts";
import { PHASES } from "./phases.ts";
import { type RenderedPhase, renderChecks, renderPhase, renderReport } from "./report.ts";

async function run(options: Options): Promise<boolean> {
  const unreachable = (await checkPostgres(ADMIN_DATABASE_URL)) ?? (await checkRedis(REDIS_URL));
  if (unreachable) throw new Error(unreachable);
  const { quick, profile, tracing, endpointAuth, egressProxy } = options;
  const scale = quick ? "quick" : "full";
  const variant = [
    tracing && "tracing on",
    endpointAuth && `endpoint auth ${endpointAuth}`,
    egressProxy && "egress proxy",
  ];
  const on = variant
    .filter(Boolean)
    .map((text) => `, ${text}`)
    .join("");
  const heading = `${new Date().toISOString()}, ${scale} scale${on}, run ${RUN_PREFIX}: ${await describeMachine()}.`;
  console.log(heading);
  // Registered first, so that it runs last: after every process that could add keys has stopped.
  onCleanup("delete this run's Redis keys", async () => void (await deleteRunKeys()));
  await dropLeftoverDatabases();
  // Verifies every signature and counts; keep-alive past the worker's idle gaps, as behind a load balancer.
  const receiver = await startReceiver(undefined, { verifyWith: "core", record: false, keepAliveTimeoutMs: 60_000 });
  onCleanup("close the receiver", () => receiver.close());
  const best = { W10: { workers: 1, concurrency: 100 }, W1: { workers: 1, concurrency: 100 } };
  const context: Context = { scale, profile, tracing, endpointAuth, egressProxy, receiver, best };

  const reports: RenderedPhase[] = [];
  for (const phase of PHASES.filter((p) => options.only?.includes(p.name) ?? true)) {
    console.log(`\n${phase.title}`);
    const report: RenderedPhase = await phase.run(context).then(
      (result) => ({ title: phase.title, ...phase.report(result) }),
      (error: Error) => {
        console.error(error.stack ?? error.message);
        return { title: phase.title, tables: [], checks: [], error: error.message };
      },
    );
    reports.push(report);
    console.log(`\n${renderPhase(report)}\n\n${renderChecks([report])}`);
  }
  if (reports.length > 1) console.log(`\n${renderChecks(reports)}`);
  if (options.out) {
    const path = resolve(process.env.INIT_CWD ?? process.cwd(), options.out);
    writeFileSync(path, renderReport(heading, reports));
    console.log(`\nWritten to ${path}`);
  }
  return reports.every((report) => report.error === undefined);
}

let options: Options;
try {
  options = parseOptions(process.argv.slice(2), PHASES);
} catch (error) {
  if (!(error instanceof UsageError)) throw error;
  console.error(`bench: ${error.message}\nRun npm run bench -- --help for the phases and options.`);
  process.exit(1);
}
if (options.help) {
  console.log(helpText(PHASES));
  process.exit(0);
}
cleanUpOnSignals();
let exitCode = 0;
try {
  if (!(await run(options))) exitCode = 1;
} catch (error) {
  console.error(`bench failed: ${(error as Error).stack ?? error}`);
  exitCode = 1;
} finally {
  console.log("cleaning up: stopping services, dropping databases, deleting Redis keys");
  await runCleanup();
}
// Nothing should be left running, but a stray handle must not keep `npm run bench` from ending.
process.exit(exitCode);
