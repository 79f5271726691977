import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { type TestReceiver, withClient } from "@webhooks/testing";
import { ApiClient } from "../api-client.ts";
import { freshDatabase } from "../databases.ts";
import { cpuPerItem, cpuPerItemText } from "../report.ts";
import { startApi } from "../services.ts";
import { DATABASES, RUN_PREFIX, settings } from "../settings.ts";
import { summarize } from "../stats.ts";
import { measureLatency } from "./latency.ts";
import { buildCases, type ListCase } from "./list-latency.ts";
import { seedDeliveryLog } from "./list-seed.ts";
import { measureThroughput, type ThroughputResult, type WorkerSetup, type Workload } from "./throughput.ts";

/**
 * What endpoint isolation costs (issue 6: throughput must not get worse than before it by more
 * than the noise): phase 1 run alternately with this checkout's services and with those of
 * `baseline`, a checkout of the code from before isolation (or of any other commit, to measure a
 * change) with its dependencies installed. Both run on this checkout's schema (the older code
 * reads and writes none of the newer columns, and pays the same indexes; a column it still uses
 * and this schema dropped is put back for it: freshDatabaseFor), with the same setup, workload
 * and history. The machine's speed drifts,
 * so the pairs alternate, and each round swaps which code goes first. Then phase 2's latency in
 * alternating pairs, and phase 3's list requests sent to both APIs in turn on one seeded log.
 */
export async function compareWithBaseline(
  receiver: TestReceiver,
  baselineDir: string,
  setup: WorkerSetup,
  rounds = 3,
): Promise<void> {
  // npm runs the bench from apps/bench; a relative path means one from where `npm run bench` was typed.
  const baseline = `${resolve(process.env.INIT_CWD ?? process.cwd(), baselineDir)}/`;
  for (const needed of ["apps/api/src/main.ts", "apps/worker/src/main.ts", "node_modules/tsx"]) {
    if (!existsSync(`${baseline}${needed}`))
      throw new Error(`--baseline ${baselineDir}: ${needed} is missing (a checkout, after npm ci)`);
  }
  await compareThroughput(receiver, baseline, setup, rounds);
  await compareLatency(receiver, baseline, setup, rounds);
  await compareListLatency(baseline);
}

/** Which code runs first in a round: they take turns, so that a drift of the machine's speed falls on both alike. */
const orderOf = (round: number) =>
  round % 2 === 0 ? (["current", "baseline"] as const) : (["baseline", "current"] as const);

async function compareThroughput(
  receiver: TestReceiver,
  baseline: string,
  setup: WorkerSetup,
  rounds: number,
): Promise<void> {
  const runs: { code: "current" | "baseline"; result: ThroughputResult }[] = [];
  for (let round = 0; round < rounds; round++) {
    for (const workload of ["W10", "W1"] as Workload[]) {
      for (const code of orderOf(round)) {
        console.log(`  round ${round + 1}, ${workload}, ${code} code`);
        const result = await measureThroughput(
          receiver,
          setup,
          code === "baseline" ? { workload, baseline } : { workload },
        );
        if (result.timedOut || result.invalidSignatures > 0)
          throw new Error(`${code} ${workload}: the run did not complete cleanly`);
        runs.push({ code, result });
      }
    }
  }

  // The services' CPU: the API, the worker, PostgreSQL and Redis, not the benchmark's own publisher and receiver.
  const totalPerDelivery = (r: ThroughputResult) =>
    [...cpuPerItem(r.cpu, r.deliveries)]
      .filter(([label]) => !label.startsWith("benchmark"))
      .reduce((sum, [, ms]) => sum + ms, 0);
  console.log(
    "\n| round | workload | code | deliveries/s | CPU ms per delivery (API + worker + PostgreSQL + Redis) | by process |",
  );
  console.log("|---|---|---|---|---|---|");
  runs.forEach(({ code, result }, i) => {
    console.log(
      `| ${Math.floor(i / 4) + 1} | ${result.workload} | ${code} | ${Math.round(result.perSecond)} | ${totalPerDelivery(result).toFixed(3)} | ` +
        `${cpuPerItemText(result.cpu, result.deliveries)} |`,
    );
  });
  console.log("\ncurrent / baseline, pair by pair (CPU per delivery; deliveries/s):");
  for (const workload of ["W10", "W1"] as Workload[]) {
    const of = (code: string) =>
      runs.filter((r) => r.code === code && r.result.workload === workload).map((r) => r.result);
    const [current, before] = [of("current"), of("baseline")];
    const pairs = current.map(
      (c, i) =>
        `${(totalPerDelivery(c) / totalPerDelivery(before[i]!)).toFixed(2)}; ${(c.perSecond / before[i]!.perSecond).toFixed(2)}`,
    );
    console.log(`  ${workload}: ${pairs.join(" | ")}`);
  }
}

async function compareLatency(
  receiver: TestReceiver,
  baseline: string,
  setup: WorkerSetup,
  rounds: number,
): Promise<void> {
  const rate = settings.latency.ratePerSecond;
  console.log(`\n  phase 2: publish -> receive at ${rate} events/s, alternating`);
  const rows: string[] = [];
  for (let round = 0; round < rounds; round++) {
    for (const code of orderOf(round)) {
      const result = await measureLatency(receiver, setup, rate, code === "baseline" ? { baseline } : {});
      const { endToEnd, publish } = result;
      rows.push(
        `| ${round + 1} | ${code} | ${endToEnd.p50.toFixed(1)} / ${endToEnd.p99.toFixed(1)} ms | ${publish.p50.toFixed(1)} / ${publish.p99.toFixed(1)} ms | ` +
          `${result.missing} | ${result.rejected} |`,
      );
    }
  }
  console.log(
    "\n| round | code | publish -> receive p50 / p99 | 202 p50 / p99 | missing | rejected |\n|---|---|---|---|---|---|",
  );
  console.log(rows.join("\n"));
}

/**
 * Phase 3's cases that the code from before isolation also serves (it has no tenant_id or
 * response_code filter), on one seeded log, each request sent to one API and then to the other
 * (the order swapping every round), one at a time.
 */
async function compareListLatency(baseline: string): Promise<void> {
  console.log("\n  phase 3: GET /v1/deliveries on 1,000,000 rows, both APIs in turn");
  const databaseUrl = await freshDatabase(DATABASES.list);
  await withClient(databaseUrl, seedDeliveryLog);
  const cases = (await withClient(databaseUrl, buildCases)).filter((c) => !/tenant_id|response_code/.test(c.query));
  const apis = {
    current: await startApi(databaseUrl, `${RUN_PREFIX}-list-current`),
    baseline: await startApi(databaseUrl, `${RUN_PREFIX}-list-baseline`, {}, undefined, baseline),
  };
  const clients = {
    current: new ApiClient(apis.current.baseUrl, 1),
    baseline: new ApiClient(apis.baseline.baseUrl, 1),
  };
  const samples = { current: cases.map(() => [] as number[]), baseline: cases.map(() => [] as number[]) };
  const request = async (code: "current" | "baseline", c: ListCase): Promise<number> => {
    const started = performance.now();
    const reply = await clients[code].request<unknown>("GET", c.query);
    if (reply.status !== 200)
      throw new Error(`${code}: GET ${c.query} answered ${reply.status}: ${JSON.stringify(reply.body)}`);
    return performance.now() - started;
  };
  try {
    for (let round = 0; round < settings.list.requestsPerCase + 10; round++) {
      for (const [index, c] of cases.entries()) {
        for (const code of orderOf(round)) {
          const took = await request(code, c);
          // The first ten rounds warm both up (they compile the route's code paths) and are not counted.
          if (round >= 10) samples[code][index]!.push(took);
        }
      }
    }
  } finally {
    await Promise.all([clients.current.close(), clients.baseline.close()]);
    await Promise.all([apis.current.stop(), apis.baseline.stop()]);
  }
  console.log("\n| case | current p50 / p99 | baseline p50 / p99 |\n|---|---|---|");
  for (const [index, c] of cases.entries()) {
    const [now, before] = [summarize(samples.current[index]!), summarize(samples.baseline[index]!)];
    console.log(
      `| ${c.name} | ${now.p50.toFixed(2)} / ${now.p99.toFixed(2)} ms | ${before.p50.toFixed(2)} / ${before.p99.toFixed(2)} ms |`,
    );
  }
}
