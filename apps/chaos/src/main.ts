import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { FAULTS } from "./faults.ts";
import { describeMachine, resultDetails, resultTable } from "./report.ts";
import { type FaultResult, runFault, type Timing } from "./run-fault.ts";
import { ENDPOINTS, startStack } from "./stack.ts";

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));

const HELP = `Usage: npm run chaos -- [--quick] [--rounds N] [--rate N] [--only fault,...] [--out FILE]

Starts the API and ${3} workers on a database and a redis-server of their own (behind TCP
proxies), four receivers (healthy, slow, flaky, stalling), and a steady load of publishes that
retry with their Idempotency-Key. Then injects each fault in turn, lets the service recover, and
counts, per fault: events accepted, deliveries made, lost (must be 0), made twice (with their
attempt log), the API's answers during the fault, and the time to recover.

  --quick      each fault once at 50 events/s (200 deliveries/s), faults of 4 s; writes no report
  --rounds N   each fault N times (a full run: 2)
  --rate N     events per second (a full run: 100, so 400 deliveries/s; faults of 10 s)
  --only LIST  only these faults: ${FAULTS.map((fault) => fault.name).join(", ")}
  --out FILE   the report of a full run (default CHAOS.md at the repository's root)

Exits 1 if any event was lost, a publish went unanswered (but while the API was being killed),
or an answer was other than 202 or a JSON 503.`;

const { values } = parseArgs({
  options: {
    help: { type: "boolean", short: "h" },
    quick: { type: "boolean" },
    rounds: { type: "string" },
    rate: { type: "string" },
    only: { type: "string" },
    out: { type: "string" },
  },
});
if (values.help) {
  console.log(HELP);
  process.exit(0);
}
const quick = values.quick ?? false;
const only = values.only?.split(",");
const faults = FAULTS.filter((fault) => !only || only.includes(fault.name));
if (faults.length === 0 || (only && faults.length !== only.length)) {
  console.error(`--only: the faults are ${FAULTS.map((fault) => fault.name).join(", ")}`);
  process.exit(1);
}
const rounds = Number(values.rounds ?? (quick ? 1 : 2));
const timing: Timing = quick
  ? { ratePerSecond: Number(values.rate ?? 50), beforeMs: 2_000, holdMs: 4_000, afterMs: 3_000 }
  : { ratePerSecond: Number(values.rate ?? 100), beforeMs: 5_000, holdMs: 10_000, afterMs: 10_000 };
const workers = 3;

const started = Date.now();
console.log(`chaos: starting the API, ${workers} workers, Redis and a database of its own...`);
const stack = await startStack(workers);
const results: FaultResult[] = [];
let stopping = false;
const stop = async (code: number) => {
  if (stopping) return;
  stopping = true;
  await stack.stop().catch((error: Error) => console.error(`cleanup: ${error.message}`));
  process.exit(code);
};
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => void stop(130));
try {
  for (let round = 1; round <= rounds; round++) {
    for (const fault of faults) {
      const result = await runFault(stack, fault, timing);
      results.push(result);
      stack.forgetReceived();
      console.log(
        `  ${fault.name.padEnd(20)} accepted ${result.accepted}, delivered ${result.delivered}/${result.expected}, lost ${result.lost}, duplicates ${result.duplicated}, recovered in ${result.recoveredInMs === undefined ? "–" : `${(result.recoveredInMs / 1000).toFixed(1)} s`}: ${result.passed ? "pass" : "FAIL"}`,
      );
    }
  }
} catch (error) {
  console.error(error);
  await stop(1);
}
const table = resultTable(results);
const details = resultDetails(results);
console.log(`\n${table}\n${details ? `\n${details}\n` : ""}`);
const passed = results.every((result) => result.passed);
const minutes = ((Date.now() - started) / 60_000).toFixed(1);
console.log(`chaos: ${passed ? "passed" : "FAILED"} in ${minutes} min`);
if (!quick) {
  const out = values.out ?? `${ROOT}CHAOS.md`;
  writeFileSync(out, chaosReport(table, details, minutes));
  console.log(`chaos: wrote ${out}`);
}
await stop(passed ? 0 : 1);

function chaosReport(tableText: string, detailsText: string, runMinutes: string): string {
  return `# Chaos

What the service does when its parts fail under load: every accepted event must be delivered to
every subscription, and every publish answered (202, or a JSON 503 the client retries). How the
run works and how to rerun it: [testing](docs/testing.md#chaos-runs).

Run on ${new Date().toISOString().slice(0, 10)}: ${describeMachine()}.

${rounds} round(s) of ${faults.length} faults at ${timing.ratePerSecond} events/s, each event to
${ENDPOINTS.length} subscriptions, ${workers} workers, ${timing.holdMs / 1000} s per fault: ${runMinutes} minutes
in all. Result: ${passed ? "every row passed" : "**some rows failed**"}.

${tableText}

"Deliveries" is accepted events × subscriptions; "During" counts the API's answers to publishes
while the fault was on or being undone (a client retries any that is not a 202, with the same
Idempotency-Key, so "Not accepted" counts events it gave up on). "Recovered in" runs from the end
of the fault to the first delivery of an event first published after it (its first request sent
then, whenever it was accepted). "Duplicates" counts webhooks sent more than once: delivery is at
least once, and when it can still happen (a worker killed between a send and its record) is in
[architecture](docs/architecture.md#leases-and-at-least-once-delivery).
${detailsText ? `\nDuplicates and failures, with their attempt log:\n\n${detailsText}\n` : ""}`;
}
