import { writeFileSync } from "node:fs";
import type { CeilingResult } from "./phases/ceiling.ts";
import type { CpuUsage } from "./cpu-usage.ts";
import type { LatencyResult } from "./phases/latency.ts";
import type { ListResult } from "./phases/list-latency.ts";
import type { Machine } from "./machine.ts";
import type { BacklogResult } from "./phases/backlog.ts";
import { fanOutSection, fanOutVerdicts, type FanOutResult } from "./phases/fanout.ts";
import { fmt, type HealthyRun, type NoisyNeighbourResult } from "./phases/noisy-neighbour.ts";
import type { ProfileSummary } from "./profiling/profile.ts";
import type { Profiles } from "./profiling/profiling.ts";
import { backlogSection, backlogVerdicts, retentionSection, retentionVerdicts } from "./report-scale.ts";
import type { RetentionResult } from "./phases/retention-load.ts";
import { settings } from "./settings.ts";
import { ms, round } from "./stats.ts";
import type { ThroughputResult } from "./phases/throughput.ts";

export interface SkippedSetup {
  workers: number;
  concurrency: number;
  reason: string;
}

export interface BenchResults {
  startedAt: Date;
  finishedAt: Date;
  machine: Machine;
  throughput: ThroughputResult[];
  skipped: SkippedSetup[];
  /** The best setup of each workload. */
  best: ThroughputResult;
  bestW1: ThroughputResult;
  ceiling: CeilingResult;
  latency: LatencyResult;
  latencyBelowCapacity: LatencyResult;
  list: ListResult;
  /** Only with --profile. */
  profiles: Profiles | undefined;
  noisy: NoisyNeighbourResult;
  fanOut: FanOutResult;
  backlog: BacklogResult;
  retention: RetentionResult;
}

export const TARGETS = {
  deliveriesPerSecond: 3_000,
  shareOfCeiling: 0.5,
  /** W1: 3,000 deliveries/s, or this share of the same run's bare ceiling. */
  w1ShareOfCeiling: 0.6,
  latencyP50Ms: 10,
  latencyP99Ms: 50,
  listP99Ms: 10,
  /** The healthy subscription's p99 beside failing endpoints, as a multiple of its p99 alone. */
  noisyP99Factor: 2,
} as const;

interface Verdict {
  figure: string;
  measured: string;
  target: string;
  met: boolean;
}

export function verdicts(r: BenchResults): Verdict[] {
  const share = r.best.perSecond / r.ceiling.perSecond;
  const listCases = r.list.cases.filter((c) => !c.reference);
  const worstList = listCases.reduce((worst, c) => (c.latency.p99 > worst.latency.p99 ? c : worst));
  const latencyComplete = r.latency.missing === 0;
  const w1Share = r.bestW1.perSecond / r.ceiling.perSecond;
  return [
    {
      figure: "W1 deliveries/s (each event to one subscription, one event per request; best setup)",
      measured: `${round(r.bestW1.perSecond)}/s = ${(w1Share * 100).toFixed(0)}% of the bare ceiling (${round(r.ceiling.perSecond)}/s)`,
      target: `>= ${round(TARGETS.deliveriesPerSecond)}/s, or >= ${TARGETS.w1ShareOfCeiling * 100}% of the ceiling`,
      met: !r.bestW1.timedOut && (r.bestW1.perSecond >= TARGETS.deliveriesPerSecond || w1Share >= TARGETS.w1ShareOfCeiling),
    },
    {
      figure: "End-to-end deliveries/s (best setup)",
      measured: `${round(r.best.perSecond)}/s`,
      target: `>= ${round(TARGETS.deliveriesPerSecond)}/s`,
      met: r.best.perSecond >= TARGETS.deliveriesPerSecond && !r.best.timedOut,
    },
    {
      figure: "... as a share of the bare ceiling",
      measured: `${(share * 100).toFixed(0)}% of ${round(r.ceiling.perSecond)}/s`,
      target: `>= ${TARGETS.shareOfCeiling * 100}%`,
      met: share >= TARGETS.shareOfCeiling,
    },
    {
      figure: `Publish -> receive p50 at ${r.latency.targetRate} events/s`,
      measured: ms(r.latency.endToEnd.p50),
      target: `<= ${TARGETS.latencyP50Ms} ms`,
      met: r.latency.endToEnd.p50 <= TARGETS.latencyP50Ms && latencyComplete,
    },
    {
      figure: `Publish -> receive p99 at ${r.latency.targetRate} events/s`,
      measured: ms(r.latency.endToEnd.p99),
      target: `<= ${TARGETS.latencyP99Ms} ms`,
      met: r.latency.endToEnd.p99 <= TARGETS.latencyP99Ms && latencyComplete,
    },
    {
      figure: "GET /v1/deliveries p99 on 1M rows (worst case)",
      measured: `${ms(worstList.latency.p99)} (${worstList.name})`,
      target: `<= ${TARGETS.listP99Ms} ms`,
      met: worstList.latency.p99 <= TARGETS.listP99Ms,
    },
    ...noisyVerdicts(r.noisy),
    ...fanOutVerdicts(r.fanOut),
    ...backlogVerdicts(r.backlog),
    ...retentionVerdicts(r.retention),
  ];
}

export function noisyVerdicts(n: NoisyNeighbourResult): Verdict[] {
  const factor = n.beside.latency.p99 / n.alone.latency.p99;
  return [
    {
      figure: "Healthy p99 beside 10 failing endpoints (phase 5)",
      measured: `${fmt(n.beside.latency.p99)}${Number.isFinite(factor) ? ` = ${factor.toFixed(1)}x` : ""}, alone ${fmt(n.alone.latency.p99)}`,
      target: `<= ${TARGETS.noisyP99Factor}x alone`,
      met: factor <= TARGETS.noisyP99Factor,
    },
    {
      figure: "... healthy webhooks delivered",
      measured: `${round(n.beside.delivered)} of ${round(n.beside.sent)}`,
      target: "all",
      met: n.beside.delivered === n.beside.sent,
    },
  ];
}

/** The verdicts on the terminal, after a run or a phase run alone. */
export function printVerdicts(list: Verdict[]): void {
  console.log("\nResults against the targets:");
  for (const verdict of list) {
    console.log(`  ${verdict.met ? "met    " : "MISSED "} ${verdict.figure}: ${verdict.measured} (target ${verdict.target})`);
  }
}

const yesNo = (met: boolean) => (met ? "yes" : "**no**");
const pct = (share: number | undefined) => (share === undefined ? "n/a" : `${(share * 100).toFixed(1)}%`);

function table(header: string[], rows: string[][]): string {
  return [`| ${header.join(" | ")} |`, `|${header.map(() => "---").join("|")}|`, ...rows.map((row) => `| ${row.join(" | ")} |`)].join("\n");
}

/** Milliseconds of CPU per item (delivery, job), per process, over a measured window. */
function cpuPerItem(cpu: CpuUsage, items: number): Map<string, number> {
  const perItem = new Map<string, number>();
  for (const entry of cpu.cores) {
    // worker-1, worker-2, ceiling-worker-1 ...: one row for all the workers.
    const label = /worker-\d+$/.test(entry.label) ? "worker process(es)" : entry.label.replace(/^bench.*/, "benchmark (publisher, receiver)");
    perItem.set(label, (perItem.get(label) ?? 0) + (entry.cores * cpu.seconds * 1000) / items);
  }
  return perItem;
}

function cpuCell(cpu: CpuUsage): string {
  return cpu.cores.map((c) => `${c.label} ${c.cores.toFixed(2)}`).join(", ") + `; machine ${cpu.machineCores.toFixed(2)}`;
}

function otherLoad(cpu: CpuUsage, cores: number): string {
  const ours = cpu.cores.reduce((sum, entry) => sum + entry.cores, 0);
  const others = cpu.others.filter((entry) => entry.cores >= 0.02).map((entry) => `${entry.command} ${entry.cores.toFixed(2)}`);
  return (
    `${cpu.machineCores.toFixed(2)} of the machine's ${cores} cores were busy on average, ${ours.toFixed(2)} of them for the processes listed` +
    (others.length ? `; other processes on the machine: ${others.join(", ")}` : "")
  );
}

const layerShare = (profile: ProfileSummary | undefined, name: RegExp) =>
  profile?.byLayer.filter((l) => name.test(l.layer)).reduce((sum, l) => sum + l.share, 0);

function layersTable(profile: ProfileSummary | undefined): string {
  if (!profile) return "_(no profile was written)_";
  const shown = profile.byLayer.filter((layer) => layer.share >= 0.005);
  const rest = profile.byLayer.filter((layer) => layer.share < 0.005).reduce((sum, layer) => sum + layer.share, 0);
  const rows = shown.map((layer) => [layer.layer, pct(layer.share)]);
  if (rest > 0) rows.push(["other packages", pct(rest)]);
  return table(["layer (each CPU sample charged to the nearest package, or our code, on its stack)", "share of samples"], rows);
}

function hottest(profile: ProfileSummary | undefined, method: "perf" | "v8"): string {
  if (!profile) return "";
  const functions = profile.topFunctions
    .slice(0, 8)
    .map((f) => `\`${f.name.replace(/\|/g, "\\|")}\` (${f.owner}) ${pct(f.share)}`)
    .join("; ");
  return method === "perf"
    ? `Hottest JS functions (a sample in native code or in the kernel counts for the nearest JS frame above it): ${functions}.`
    : `Hottest functions by self time: ${functions}.`;
}

/** The share of samples in functions whose name matches, e.g. the ioredis Pipeline constructor. */
function functionShare(profile: ProfileSummary | undefined, name: RegExp): number {
  return profile?.topFunctions.filter((f) => name.test(f.name)).reduce((sum, f) => sum + f.share, 0) ?? 0;
}

/** Section 5, also printed on its own by `npm run bench -- --only noisy`. */
export function noisySection(n: NoisyNeighbourResult, cores: number): string[] {
  const s = settings.noisyNeighbour;
  const noiseDeliveries = (s.hangingReceivers + s.erroringReceivers) * s.noiseRatePerSecond;
  const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);
  const row = (label: string, h: HealthyRun) => [
    label,
    fmt(h.latency.p50),
    fmt(h.latency.p99),
    fmt(h.latency.max),
    fmt(h.slowestDelivered),
    `${round(h.delivered)} of ${round(h.sent)}${h.rejected ? ` (${h.rejected} not accepted)` : ""}`,
    cpuCell(h.cpu),
  ];
  return [
    "## 5. Noisy neighbour: one healthy endpoint beside failing ones",
    "Method: the service at its default settings (no WORKER_CONCURRENCY, DELIVERY_TIMEOUT or endpoint-isolation setting passed), one API " +
      "and one worker process on a fresh database. One subscription, for event type A, points at the verifying receiver. Ten, for type B, " +
      `point at loopback endpoints on ports of their own, so each is its own origin: ${s.hangingReceivers} accept the connection and the ` +
      `request and never answer, ${s.erroringReceivers} answer 500 at once. Part 1: A alone, open loop at ${s.healthyRatePerSecond}/s for ` +
      `${s.aloneMs / 1000} s, after a ${s.warmupMs / 1000} s warm-up that is not counted. Part 2: the same ${s.healthyRatePerSecond}/s of A for ` +
      `${s.besideMs / 1000} s, and beside it B at ${s.noiseRatePerSecond}/s, i.e. ${noiseDeliveries} deliveries/s to the failing endpoints ` +
      "(their retries come on top). Latency is measured as in phase 2, from the scheduled send time to the verified receipt. Each part's " +
      `healthy webhooks have ${s.drainMs / 1000} s after the last send to arrive; one that did not counts as not delivered, and a percentile ` +
      "that falls on one reads so. The hanging endpoints count the most requests they held open at once; the sender's own timeout, or the " +
      "end of the phase, closes them.",
    table(
      ["healthy subscription", "p50", "p99", "max", "slowest delivered", "delivered", "CPU (cores) by process"],
      [row("part 1: alone", n.alone), row(`part 2: beside ${noiseDeliveries} failing deliveries/s`, n.beside)],
    ),
    table(
      ["failing endpoints (part 2)", "requests received", "most requests open at once"],
      [
        [
          `${s.hangingReceivers} that never answer`,
          `${round(sum(n.hangingRequests))} (${n.hangingRequests.join(", ")})`,
          `${Math.max(...n.hangingPeakOpen)} at one endpoint (each: ${n.hangingPeakOpen.join(", ")}); ${n.hangingPeakOpenTogether} across the ${s.hangingReceivers}`,
        ],
        [`${s.erroringReceivers} that answer 500`, `${round(sum(n.erroringRequests))} (${n.erroringRequests.join(", ")})`, "-"],
      ],
    ),
    `${round(n.noiseSent)} B events were published${n.noiseRejected ? ` (${n.noiseRejected} not accepted)` : ""}. ` +
      `Invalid signatures: ${n.invalidSignatures}. ` +
      `The machine had ${n.alone.cpu.machineCores.toFixed(2)} of its ${cores} cores busy on average during part 1 and ` +
      `${n.beside.cpu.machineCores.toFixed(2)} during part 2; on a busy or shared machine the ratio is only as steady as the p99 alone.`,
    `**Hand-off** (between parts 1 and 2): how soon a delivery that waits starts once it may. A subscription with \`max_in_flight\` 1 ` +
      `gets ${round(n.handoff.deliveries)} events at once, and its receiver answers each request after ${s.handoff.serviceMs} ms, so every ` +
      "delivery but the first waits in the subscription's line for the one slot. From the receiver's answer to the next request's arrival " +
      "(the attempt recorded, the slot released, the next delivery woken, claimed, let through and recorded as started, the request sent): " +
      `p50 ${fmt(n.handoff.gap.p50)}, p99 ${fmt(n.handoff.gap.p99)}, max ${fmt(n.handoff.gap.max)}. Requests the receiver had at once: at most ` +
      `${n.handoff.peakOpen}. Nothing polls: the gap is the work of the hand-off itself.`,
  ];
}

export function renderReport(r: BenchResults): string {
  const v = verdicts(r);
  const { best, ceiling, latency, latencyBelowCapacity: lowRate, list, profiles } = r;
  const productCpu = cpuPerItem(best.cpu, best.deliveries);
  const ceilingCpu = cpuPerItem(ceiling.cpu, ceiling.jobs);
  const productTotal = [...productCpu.values()].reduce((sum, value) => sum + value, 0);
  const ceilingTotal = [...ceilingCpu.values()].reduce((sum, value) => sum + value, 0);
  const apiCpuPerEvent = (productCpu.get("api") ?? 0) * settings.throughput.subscriptions;
  const db = best.database;
  const hotShare = db.deliveryUpdates ? db.deliveryHotUpdates / db.deliveryUpdates : 0;
  const seconds = (r.finishedAt.getTime() - r.startedAt.getTime()) / 1000;
  const listCases = list.cases.filter((c) => !c.reference);
  const reference = list.cases.find((c) => c.reference);
  const pg = profiles?.postgres;

  const blocks: string[] = [];
  const add = (...parts: string[]) => blocks.push(...parts.filter((part) => part !== ""));

  add(
    "# Benchmarks",
    `Written by \`npm run bench\` (apps/bench/src) on ${r.startedAt.toISOString()}; the run took ${Math.round(seconds)} s. ` +
      `Machine: **${r.machine.cores} cores** (os.availableParallelism()), ${r.machine.cpuModel}, ${r.machine.memoryGb} GB RAM, ${r.machine.platform}; ` +
      `**Node ${r.machine.node}**, ${r.machine.postgres}, Redis ${r.machine.redis}. Code measured: commit ${r.machine.commit.replace(/\|/g, "/")}.`,
    "Everything runs on this one machine over loopback: PostgreSQL, Redis, the API and worker processes (started as in production, " +
      "`node --import tsx src/main.ts` in the app's directory, with LOG_LEVEL=warn and NODE_ENV=development), and the benchmark process, which publishes through the " +
      "HTTP API and runs the receiver. The receiver verifies the Standard Webhooks signature of every delivery (HMAC-SHA256 with node:crypto) " +
      "and counts invalid ones and duplicates. The machine may be shared with other work; the CPU it used is shown beside each measurement.",
  );

  add(
    "## Results against the targets",
    table(["figure", "measured", "target", "met"], v.map((x) => [x.figure, x.measured, x.target, yesNo(x.met)])),
    `In short: a delivery costs ${productTotal.toFixed(2)} ms of CPU across all processes, ${(productTotal / ceilingTotal).toFixed(1)}x the bare ` +
      `ceiling's, and on ${r.machine.cores} cores that, not I/O, sets the throughput` +
      (latency.acceptedRate < latency.targetRate * 0.95 ? `; the API accepts fewer than the ${latency.targetRate} events/s of the latency test` : "") +
      "; the list queries themselves run in well under a millisecond in PostgreSQL. " +
      (ceiling.perSecond < TARGETS.deliveriesPerSecond
        ? `The bare ceiling itself (${round(ceiling.perSecond)}/s) is below ${round(TARGETS.deliveriesPerSecond)}/s on this machine, so the ` +
          "absolute throughput target cannot be met here with these parts; the share of the ceiling is the telling figure. "
        : "") +
      "The section *Where the time goes* has the breakdown and the fixes.",
  );

  add(
    "## 1. End-to-end throughput",
    `Method: for each setup, a fresh database and fresh API and worker processes; ${settings.throughput.subscriptions} active subscriptions, all ` +
      `matching \`invoice.paid\`, point at the receiver; ${round(settings.throughput.events)} events are published through \`POST /v1/events\` by ` +
      `${settings.throughput.publishConcurrency} closed-loop clients (one undici Pool with keep-alive), i.e. ` +
      `${round(settings.throughput.events * settings.throughput.subscriptions)} deliveries. The clock runs from the first publish until the ` +
      "receiver has verified the last delivery. Then PostgreSQL must hold every delivery as `delivered` and `GET /v1/deliveries?status=queued` " +
      "must return nothing. The one receiver stands in for the hosts of as many customers, so the origin cap (`ORIGIN_MAX_IN_FLIGHT`) is set to " +
      "the setup's total concurrency (it is one origin here), and each subscription's `max_in_flight` likewise (as a customer sending hundreds of " +
      "webhooks a second to one endpoint would set it: these phases measure the pipeline, phase 5 the default caps); everything else is at " +
      "its default. Two workloads with the same number of " +
      "deliveries: **W10**, each event to all 10 subscriptions (the publishes above); **W1**, each subscription with an event type of its " +
      "own and each event to exactly one of them, one event per request, so the API publishes as many events as there are deliveries. " +
      "Setups (worker processes x WORKER_CONCURRENCY):",
    table(
      ["workload", "setup", "deliveries/s", "seconds", "publishing took", "all `delivered` in PostgreSQL after", "invalid signatures", "duplicates", "queued listed by API", "peak DB connections", "CPU (cores) by process"],
      r.throughput.map((t) => [
        `${t.workload} (${round(t.events)} events)`,
        `${t.workers} x ${t.concurrency}${t === best || t === r.bestW1 ? " (best)" : ""}`,
        `${round(t.perSecond)}${t.timedOut ? " (timed out)" : ""}`,
        t.seconds.toFixed(1),
        `${t.publishSeconds.toFixed(1)} s${t.publishRejected ? ` (${t.publishRejected} rejected)` : ""}`,
        t.recordedSeconds === undefined ? `not reached: ${JSON.stringify(t.databaseStatuses)}` : `${t.recordedSeconds.toFixed(1)} s`,
        String(t.invalidSignatures),
        String(t.duplicates),
        String(t.queuedListedByApi),
        String(t.peakConnections),
        cpuCell(t.cpu),
      ]),
    ),
    r.skipped.map((s) => `Not run: ${s.workers} x ${s.concurrency}, because ${s.reason}.`).join(" "),
    `During the best W10 run ${otherLoad(best.cpu, r.machine.cores)}.`,
  );

  add(
    "## 2. Publish -> receive latency",
    `Method: one subscription (its \`max_in_flight\` and the origin cap set to the workers' concurrency, as in phase 1); events are published open loop at ${latency.targetRate}/s: event i is sent at t0 + i x ${(1000 / latency.targetRate).toFixed(0)} ms ` +
      `whatever happened to the earlier ones, through an undici Pool of ${settings.latency.connections} connections, for ${settings.latency.durationMs / 1000} s after a ` +
      `${settings.latency.warmupMs / 1000} s warm-up that is not counted. Latency is the time the receiver had verified the delivery minus the ` +
      "*scheduled* send time, which travels in the event's data, so a late sender or requests queued in the client count against the " +
      `service (no coordinated omission). Worker setup: the best of phase 1 (${best.workers} x ${best.concurrency}). The ${lowRate.targetRate}/s row ` +
      "is the same measurement well below capacity, for reference; it is not the target.",
    table(
      ["rate", "p50", "p99", "max", "until the 202: p50 / p99", "from the 202 to receipt: p50 / p99", "sent/s", "accepted/s", "delivered/s", "missing", "invalid signatures"],
      [latency, lowRate].map((l) => [
        `${l.targetRate}/s${l === latency ? " (target)" : ""}`,
        ms(l.endToEnd.p50),
        ms(l.endToEnd.p99),
        ms(l.endToEnd.max),
        `${ms(l.publish.p50)} / ${ms(l.publish.p99)}`,
        `${ms(l.afterAccept.p50)} / ${ms(l.afterAccept.p99)}`,
        round(l.achievedSendRate),
        round(l.acceptedRate),
        round(l.achievedDeliveryRate),
        String(l.missing),
        String(l.invalidSignatures),
      ]),
    ),
    (latency.acceptedRate < latency.targetRate * 0.95
      ? `The API accepted only ${round(latency.acceptedRate)} events/s of the ${latency.targetRate} offered, so requests queued in the client ` +
        "and waited longer the longer the test ran: at this rate the figure measures that queue, and nearly all of it passes before the 202. "
      : "") +
      `At ${lowRate.targetRate}/s the API answers 202 in ${ms(lowRate.publish.p50)} at p50, and the queue, the worker and the webhook's HTTP ` +
      `request take another ${ms(lowRate.afterAccept.p50)}` +
      (lowRate.endToEnd.p50 <= TARGETS.latencyP50Ms && lowRate.endToEnd.p99 <= TARGETS.latencyP99Ms && lowRate.missing === 0
        ? `; at that rate both latency targets hold (p50 ${ms(lowRate.endToEnd.p50)}, p99 ${ms(lowRate.endToEnd.p99)}), so what misses them at ` +
          `${latency.targetRate}/s is capacity, not the path itself.`
        : ".") +
      ` While sending at ${latency.targetRate}/s the machine had ${latency.cpu.machineCores.toFixed(2)} of its ${r.machine.cores} cores busy ` +
      `(${latency.cpu.cores.map((c) => `${c.label} ${c.cores.toFixed(2)}`).join(", ")}): ` +
      `${((latency.cpu.cores.reduce((sum, c) => sum + c.cores, 0) * 1000) / latency.targetRate).toFixed(2)} ms of CPU per event across the processes, ` +
      "for a path that crosses five of them (benchmark client, API, PostgreSQL, Redis, worker, and back to the benchmark's receiver). " +
      "At one event every 2 ms that many busy cores means every hop waits for a CPU, and the waits add up; the 1-event batches of this " +
      "rate also get none of the batching that phase 1 enjoys.",
  );

  add(
    "## 3. `GET /v1/deliveries` on 1,000,000 deliveries",
    `Method: a separate database seeded with SQL in ${list.seedSeconds.toFixed(0)} s: ${settings.list.subscriptions} subscriptions, ` +
      `${round(settings.list.events)} events over 30 days with ${settings.list.deliveriesPerEvent} deliveries each, 40 rows sharing each created_at ` +
      "millisecond, 80% delivered / 15% failed / 5% queued, 5 event types, ids `dlv_` + a valid ULID; then VACUUM ANALYZE, and an API process on " +
      `it. Each case is requested ${settings.list.requestsPerCase} times, one request at a time, the cases taking turns, after 10 warm-up rounds; ` +
      "default page size (20). Latency is measured at the client, over HTTP on loopback. The plan and the time spent inside PostgreSQL come from " +
      "EXPLAIN ANALYZE of the SQL that packages/db builds for the case, planned for its values and again as a generic plan (which " +
      "PostgreSQL may switch a prepared statement to); the generic plan is shown only where it differs. `GET /healthz`, which uses neither the database nor the API key, takes " +
      "its turn as a reference for the noise of the machine and the HTTP stack.",
    table(
      ["case", "p50", "p99", "max", "rows", "in PostgreSQL (EXPLAIN ANALYZE)", "plan", "index scan"],
      list.cases.map((c) => [
        c.name,
        ms(c.latency.p50),
        ms(c.latency.p99),
        ms(c.latency.max),
        c.reference ? "-" : String(c.rows),
        c.reference ? "-" : ms(c.executionMs),
        c.plan,
        c.reference ? "-" : c.indexScan ? "yes" : "**no**",
      ]),
    ),
    (listCases.every((c) => c.indexScan) ? "" : `Not index scans: ${listCases.filter((c) => !c.indexScan).map((c) => c.name).join(", ")}. `) +
      `Each request cost the API process ${list.apiCpuMsPerRequest.toFixed(2)} ms of CPU and PostgreSQL ${list.postgresCpuMsPerRequest.toFixed(2)} ms ` +
      "(from /proc, over the measurement)." +
      (list.apiProfile ? " A CPU profile of the API serving the same requests (separate pass):" : ""),
    list.apiProfile ? layersTable(list.apiProfile) : "",
  );

  add(
    "## 4. The bare ceiling",
    `Method: the least a delivery worker can do with the same parts, in ${ceiling.workers} process(es) at concurrency ${ceiling.concurrency} ` +
      "(the best setup of phase 1): a BullMQ Worker whose handler signs the body (HMAC-SHA256), POSTs it with undici (keep-alive) to the same " +
      "verifying receiver, and runs one `UPDATE ... WHERE id = $1` with node-postgres on a table of its own " +
      `(${round(settings.ceiling.jobs)} rows, one per job), through a pool of DATABASE_POOL_SIZE (10) connections per process, as the ` +
      `product's worker does. The ${round(settings.ceiling.jobs)} jobs are enqueued with addBulk first ` +
      "(removeOnComplete, like the product's jobs); the worker processes are started, then told to begin, and the clock runs until the " +
      "receiver has verified the last webhook.",
    table(
      ["jobs", "seconds", "jobs/s", "invalid signatures", "rows updated", "CPU (cores) by process"],
      [
        [
          round(ceiling.jobs),
          ceiling.seconds.toFixed(1),
          `**${round(ceiling.perSecond)}**${ceiling.timedOut ? " (timed out)" : ""}`,
          String(ceiling.invalidSignatures),
          round(ceiling.rowsUpdated),
          cpuCell(ceiling.cpu),
        ],
      ],
    ),
    `During the ceiling run ${otherLoad(ceiling.cpu, r.machine.cores)}.`,
  );

  add(...noisySection(r.noisy, r.machine.cores));
  add(...backlogSection(r.backlog));
  add(...fanOutSection(r.fanOut));
  add(...retentionSection(r.retention));

  const labels = [...new Set([...productCpu.keys(), ...ceilingCpu.keys()])];
  add(
    "## Where the time goes",
    "On 2 cores every process competes for the same CPU, so the unit that matters is CPU time per delivery, summed over every process that " +
      "works for it (read from /proc over the measured windows of phases 1 and 4):",
    table(
      ["process", "product, best setup: ms of CPU per delivery", "bare ceiling: ms of CPU per job"],
      [
        ...labels.map((label) => [label, (productCpu.get(label) ?? 0).toFixed(3), (ceilingCpu.get(label) ?? 0).toFixed(3)]),
        ["**total**", `**${productTotal.toFixed(2)}**`, `**${ceilingTotal.toFixed(2)}**`],
      ],
    ),
    `The API's part is publishing: ${apiCpuPerEvent.toFixed(2)} ms of CPU per ` +
      `\`POST /v1/events\` (${settings.throughput.subscriptions} deliveries each). ` +
      (setupSpread(r.throughput) < 0.15
        ? "More concurrency or a second worker process changed little (phase 1): the cores were already busy."
        : `The setups of phase 1 differ by ${(setupSpread(r.throughput) * 100).toFixed(0)}% (best ${best.workers} x ${best.concurrency}), so ` +
          "the setup matters on this machine: see their table."),
  );

  if (profiles) add(...profileSections(profiles));
  else add("### Profiles", NOT_PROFILED);

  add(
    "### PostgreSQL",
    `Per delivery the best run committed ${(db.transactions / best.deliveries).toFixed(2)} transactions and updated ` +
      `${(db.deliveryUpdates / best.deliveries).toFixed(2)} \`deliveries\` rows (besides one insert each into \`deliveries\` and ` +
      `\`delivery_attempts\`); ${pct(hotShare)} of those updates were HOT, the others wrote new entries into the table's indexes ` +
      `(${db.deliveryIndexes} of them; fillfactor ${db.deliveryFillfactor}).` +
      (pg
        ? ` A machine-wide \`perf record\` during the profiled run found PostgreSQL's backends in ${pct(pg.backendShareOfMachine)} of all samples, ` +
          "divided as follows (share of backend samples under each PostgreSQL function):"
        : profiles
          ? " perf was not available, so PostgreSQL's own time is not broken down."
          : ""),
    pg ? table(["stage", "share of backend CPU"], pg.stages.map((s) => [s.label, pct(s.share)])) : "",
  );

  add("### What this means, and what would fix it", findings(r).join("\n"));
  return `${blocks.join("\n\n")}\n`;
}

const NOT_PROFILED =
  "Not profiled in this run. `npm run bench -- --profile` adds a shorter, profiled run of phase 1 (Linux perf, or `node --cpu-prof` " +
  "without it) and a profile of the API serving phase 3's requests, with the breakdown of the worker's, the API's and PostgreSQL's CPU here.";

/** Where the worker's and the API's CPU goes, from the profiled run (--profile). */
function profileSections(p: Profiles): string[] {
  const overhead = p.queryOverhead;
  const blocks: string[] = [];
  const add = (...parts: string[]) => blocks.push(...parts.filter((part) => part !== ""));
  const method =
    p.method === "perf"
      ? "Linux `perf record` sampled the whole machine (cpu-clock, 499 Hz, with call graphs) during a separate, shorter run of phase 1 " +
        `(${round(settings.profile.events)} events, ${round(p.run.deliveries)} deliveries, ${round(p.run.perSecond)}/s while ` +
        `profiled), from ${settings.profile.perfDelayMs / 1000} s after the first publish to the last delivery; the API and the first worker ran ` +
        "with `--perf-basic-prof` so that their JS frames have names (where V8 reused code memory, the newest name is kept). Each sample of a process's " +
        "main thread is charged to the nearest package, or our code, on its call chain, so time in native code and in the kernel goes to " +
        "whoever called it. perf samples a thread only while it is on a CPU; V8's own profiler, on a machine this busy, piles samples onto " +
        "the socket writes where the thread gets preempted."
      : "A CPU profile (`node --cpu-prof`, perf being unavailable) of the first worker during a shorter run of phase 1 " +
        `(${round(settings.profile.events)} events, ${round(p.run.deliveries)} deliveries, ${round(p.run.perSecond)}/s while profiled), ` +
        "cut to the measured window. Caveat: on a busy machine V8's samples pile up on socket writes (`writev`), where the thread is " +
        "preempted, so those shares overstate CPU.";
  add(
    "### Worker process",
    method +
      (p.kernelShare.worker !== undefined
        ? ` ${pct(p.kernelShare.worker)} of the worker's samples were in the kernel, mostly the loopback TCP path of its socket writes.`
        : ""),
    layersTable(p.worker),
    hottest(p.worker, p.method),
    "The statements of the delivery path (publishing, claiming, recording) run on node-postgres directly; everything else goes through " +
      `Prisma. For scale, measured in the benchmark process on \`SELECT 1\`, one query at a time: ${overhead.prisma.cpuUs.toFixed(0)} us of ` +
      `CPU and ${ms(overhead.prisma.meanMs)} per query through Prisma's \`$queryRaw\`, against ${overhead.pg.cpuUs.toFixed(0)} us and ` +
      `${ms(overhead.pg.meanMs)} with node-postgres alone.`,
  );
  add(
    "### API process (publishing)",
    "Same run, the API process" +
      (p.kernelShare.api !== undefined ? ` (${pct(p.kernelShare.api)} of its samples in the kernel)` : "") +
      ":",
    layersTable(p.api),
    hottest(p.api, p.method),
  );
  return blocks;
}

/**
 * The reading of the figures, as bullet points. Each one is computed from this run's data and
 * says only what the data shows; the fixes name the code the profiles point at.
 */
function findings(r: BenchResults): string[] {
  const { best, ceiling, latency, latencyBelowCapacity: lowRate, list, profiles } = r;
  const db = best.database;
  const product = cpuPerItem(best.cpu, best.deliveries);
  const bare = cpuPerItem(ceiling.cpu, ceiling.jobs);
  const productTotal = [...product.values()].reduce((sum, v) => sum + v, 0);
  const bareTotal = [...bare.values()].reduce((sum, v) => sum + v, 0);
  const extra = [...product]
    .map(([label, value]) => ({ label, extra: value - (bare.get(label) ?? 0) }))
    .sort((a, b) => b.extra - a.extra)
    .filter((e) => Math.abs(e.extra) >= 0.02);
  const worker = profiles?.worker;
  const api = profiles?.api;
  const top = (profile: ProfileSummary | undefined, n: number) =>
    profile?.byLayer
      .filter((l) => !/^(Node\.js internals|garbage collector)/.test(l.layer))
      .slice(0, n)
      .map((l) => `${l.layer} ${pct(l.share)}`)
      .join(", ") ?? "n/a";
  const pg = profiles?.postgres;
  const stage = (label: RegExp) => pg?.stages.filter((st) => label.test(st.label)).reduce((sum, st) => sum + st.share, 0);
  const parsePlan = stage(/^(parse|analyze|plan)/);
  const indexShare = stage(/index maintenance/);
  const perDelivery = db.transactions / best.deliveries;
  const claimsHot = Math.min(1, db.deliveryHotUpdates / best.deliveries);
  const apiCpuPerEvent = (product.get("api") ?? 0) * settings.throughput.subscriptions;
  const listCases = list.cases.filter((c) => !c.reference);
  const reference = list.cases.find((c) => c.reference);
  const deep = deepExtra(listCases);
  const out: string[] = [];

  out.push(
    `- **CPU per delivery sets the throughput.** ${productTotal.toFixed(2)} ms per delivery across all processes against ` +
      `${bareTotal.toFixed(2)} ms for the bare loop; by process the difference is ` +
      `${extra.map((e) => `${e.label} ${e.extra > 0 ? "+" : ""}${e.extra.toFixed(2)} ms`).join(", ")} (the bare loop has no API: it does not publish). ` +
      `At ${productTotal.toFixed(2)} ms, ${r.machine.cores} busy cores give at most ${round((r.machine.cores * 1000) / productTotal)} deliveries/s, ` +
      `and ${round(TARGETS.deliveriesPerSecond)}/s would need ${((r.machine.cores * 1000) / TARGETS.deliveriesPerSecond).toFixed(2)} ms` +
      (bareTotal > (r.machine.cores * 1000) / TARGETS.deliveriesPerSecond ? ", less than even the bare loop costs on this machine." : "."),
  );
  if (worker) out.push(
    `- **Worker:** ${top(worker, 5)} of its samples. Its claims and its records run on node-postgres, batched across the jobs in ` +
      `flight (${perDelivery.toFixed(2)} transactions per delivery here, publishing included), so each statement's cost is shared by ` +
      "the deliveries of a batch." +
      (layerShare(worker, /BullMQ/)! > 0.15
        ? ` BullMQ's own Redis traffic (taking a job and moving it to completed: Lua scripts through ioredis) is ${pct(layerShare(worker, /BullMQ/))}. ` +
          "It costs the same per job in the bare loop; only fewer jobs per delivery (say one job per event, fanned out inside the " +
          "worker, at the price of the one-job-per-delivery design) would reduce it."
        : ""),
  );
  if (pg && parsePlan !== undefined) {
    out.push(
      parsePlan > 0.15
        ? `- **PostgreSQL parses and plans every statement again:** ${pct(parsePlan)} of backend CPU. Named (prepared) statements, e.g. ` +
          "`statementNameGenerator` on `PrismaPg` in packages/db/src/client.ts, plan each statement once per connection."
        : `- **PostgreSQL's statements are prepared:** parsing and planning are ${pct(parsePlan)} of backend CPU. Executing is ` +
          `${pct(stage(/^execute/))}, of which index maintenance ${pct(indexShare)}, and committing ${pct(stage(/^commit/))}.`,
    );
  }
  out.push(
    `- **Index maintenance.** ${pct(hotShare(db))} of \`deliveries\` updates were HOT: recording an attempt changes \`status\` and ` +
      "`next_attempt_at`, which are indexed, so it can never be; the claim changes only the lease columns and is HOT when its page has " +
      `room, ${pct(claimsHot)} of claims here (fillfactor ${db.deliveryFillfactor}). Every insert and every non-HOT update writes into the ` +
      `table's ${db.deliveryIndexes} indexes` +
      (indexShare !== undefined ? ` (${pct(indexShare)} of PostgreSQL's CPU)` : "") +
      ". Four of them serve the list's filter combinations (none, subscription, status, both); they are the price of keeping every list " +
      "query an index scan (section 3). The `event` filter has no index of its own: it walks the newest-first index." +
      (claimsHot < 0.9 && db.deliveryFillfactor >= 100 ? " A fillfactor of 80 would leave claims room to be HOT." : ""),
  );
  out.push(
    `- **Publishing costs ${apiCpuPerEvent.toFixed(2)} ms of API CPU per event** in phase 1, 10 deliveries each${api ? ` (${top(api, 5)} of the API's samples)` : ""}` +
      (latency.acceptedRate < latency.targetRate * 0.95
        ? `, so with one subscription per event the API is the bottleneck: beside a busy worker it accepted ${round(latency.acceptedRate)} of the ` +
          `${latency.targetRate} events/s offered in phase 2, and requests queued in the client`
        : `; in phase 2 it kept up with the ${latency.targetRate} events/s offered`) +
      `. Below capacity (${lowRate.targetRate}/s) the 202 takes ${ms(lowRate.publish.p50)} at p50 and the rest of the way ${ms(lowRate.afterAccept.p50)}. ` +
      "Publishes that arrive together are written as one batch (packages/db/src/events.ts): one lookup of the matching subscriptions and " +
      "one insert of the events and their deliveries on node-postgres, then one Redis call. Under the closed-loop load of phase 1 batches " +
      "hold several events; at a steady 500/s most hold one, and each event pays the whole HTTP request, two SQL round trips and a Redis " +
      "round trip on its own. Folding the lookup into the insert would need the delivery ids generated inside PostgreSQL.",
  );
  if (layerShare(worker, /ulid/)! > 0.01 || layerShare(api, /ulid/)! > 0.01) {
    out.push(
      `- **ulid** takes ${pct(layerShare(worker, /ulid/))} of the worker's samples and ${pct(layerShare(api, /ulid/))} of the API's: its default ` +
        "random source asks the OS for one byte per character. `monotonicFactory(prng)` with a pooled PRNG removes most of that.",
    );
  }
  if (r.skipped.length > 0) {
    out.push(
      `- **Connections.** ${r.skipped.map((skip) => `${skip.workers} x ${skip.concurrency} could not run: ${skip.reason}`).join("; ")}. ` +
        `In phase 1 at most ${Math.max(...r.throughput.map((t) => t.peakConnections))} connections were open at once; a pooler such as ` +
        "PgBouncer lets more processes share the server.",
    );
  }
  out.push(
    `- **Listing is fast in PostgreSQL and slower around it.** The list queries run in ${ms(Math.min(...listCases.map((c) => c.executionMs)))} to ` +
      `${ms(Math.max(...listCases.map((c) => c.executionMs)))} inside PostgreSQL; a request takes ${ms(Math.min(...listCases.map((c) => c.latency.p50)))} ` +
      `to ${ms(Math.max(...listCases.map((c) => c.latency.p50)))} at p50 and ${list.apiCpuMsPerRequest.toFixed(2)} ms of API CPU` +
      (list.apiProfile ? `, mostly ${top(list.apiProfile, 3)} of the API's samples (V8 profile of a separate pass, one request at a time).` : ".") +
      (deep > 0.2
        ? ` A deep page costs ${ms(deep)} more at p50: the page query also checks that its cursor exists (packages/db/src/paging.ts), ` +
          "which is one more index lookup."
        : "") +
      (reference
        ? ` The tail is partly the machine's: \`GET /healthz\`, which does no work, had a p99 of ${ms(reference.latency.p99)} in the same run.`
        : ""),
  );
  return out;
}

function hotShare(db: ThroughputResult["database"]): number {
  return db.deliveryUpdates ? db.deliveryHotUpdates / db.deliveryUpdates : 0;
}

/** How much slower, at p50, the deep-page cases are than the same filters on the first page. */
function deepExtra(cases: { name: string; latency: { p50: number } }[]): number {
  const deep = cases.filter((c) => c.name.startsWith("deep page"));
  const shallow = cases.filter((c) => !c.name.startsWith("deep page"));
  const mean = (list: { latency: { p50: number } }[]) => list.reduce((sum, c) => sum + c.latency.p50, 0) / Math.max(1, list.length);
  return mean(deep) - mean(shallow);
}

/** (best - worst) / best deliveries per second over the setups that ran. */
function setupSpread(runs: ThroughputResult[]): number {
  const rates = runs.map((run) => run.perSecond);
  return rates.length < 2 ? 0 : (Math.max(...rates) - Math.min(...rates)) / Math.max(...rates);
}

export function writeReport(path: string, results: BenchResults): void {
  writeFileSync(path, renderReport(results));
}
