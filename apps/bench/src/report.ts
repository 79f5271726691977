import { writeFileSync } from "node:fs";
import type { CpuUsage } from "./cpu-usage.ts";
import type { Machine } from "./machine.ts";
import type { BacklogResult } from "./phases/backlog.ts";
import type { CeilingResult } from "./phases/ceiling.ts";
import { type FanOutResult, fanOutSection, fanOutVerdicts } from "./phases/fanout.ts";
import type { LatencyResult } from "./phases/latency.ts";
import type { ListResult } from "./phases/list-latency.ts";
import { fmt, type HealthyRun, type NoisyNeighbourResult, WAIT_REASONS } from "./phases/noisy-neighbour.ts";
import type { RetentionResult } from "./phases/retention-load.ts";
import type { ThroughputResult } from "./phases/throughput.ts";
import type { W1ShareResult } from "./phases/w1-share.ts";
import type { PostgresBreakdown } from "./profiling/perf.ts";
import type { ProfileSummary } from "./profiling/profile.ts";
import type { Profiles } from "./profiling/profiling.ts";
import { backlogSection, backlogVerdicts, retentionSection, retentionVerdicts } from "./report-scale.ts";
import { settings } from "./settings.ts";
import { ms, round } from "./stats.ts";

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
  /** W1 and the ceiling back to back, in rounds: W1's verdict. */
  w1Share: W1ShareResult;
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
  return [
    w1Verdict(r.w1Share),
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

/** W1's target, read from the median round of phase 4b. */
export function w1Verdict(w: W1ShareResult): Verdict {
  const { median, rounds } = w;
  return {
    figure:
      "W1 deliveries/s (each event to one subscription, one event per request; best setup), against the ceiling run right after it",
    measured:
      `${round(median.w1.perSecond)}/s = ${(median.share * 100).toFixed(0)}% of the bare ceiling (${round(median.ceiling.perSecond)}/s), ` +
      `the median of ${rounds.length} rounds: ${rounds.map((each) => `${(each.share * 100).toFixed(0)}%`).join(", ")}`,
    target: `>= ${round(TARGETS.deliveriesPerSecond)}/s, or >= ${TARGETS.w1ShareOfCeiling * 100}% of the ceiling`,
    met:
      !median.w1.timedOut &&
      !median.ceiling.timedOut &&
      (median.w1.perSecond >= TARGETS.deliveriesPerSecond || median.share >= TARGETS.w1ShareOfCeiling),
  };
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
    console.log(
      `  ${verdict.met ? "met    " : "MISSED "} ${verdict.figure}: ${verdict.measured} (target ${verdict.target})`,
    );
  }
}

const yesNo = (met: boolean) => (met ? "yes" : "**no**");
const pct = (share: number | undefined) => (share === undefined ? "n/a" : `${(share * 100).toFixed(1)}%`);

function table(header: string[], rows: string[][]): string {
  return [
    `| ${header.join(" | ")} |`,
    `|${header.map(() => "---").join("|")}|`,
    ...rows.map((row) => `| ${row.join(" | ")} |`),
  ].join("\n");
}

/** Where PostgreSQL's backends spent their CPU in a profiled run, by stage of a statement. */
export function postgresStagesTable(pg: PostgresBreakdown): string {
  return table(
    ["stage", "share of backend CPU"],
    pg.stages.map((s) => [s.label, pct(s.share)]),
  );
}

/** Milliseconds of CPU per item (delivery, job), per process, over a measured window. */
export function cpuPerItem(cpu: CpuUsage, items: number): Map<string, number> {
  const perItem = new Map<string, number>();
  for (const entry of cpu.cores) {
    // worker-1, worker-2, ceiling-worker-1 ...: one row for all the workers.
    const label = /worker-\d+$/.test(entry.label)
      ? "worker process(es)"
      : entry.label.replace(/^bench.*/, "benchmark (publisher, receiver)");
    perItem.set(label, (perItem.get(label) ?? 0) + (entry.cores * cpu.seconds * 1000) / items);
  }
  return perItem;
}

/** Milliseconds of CPU per item, all processes together. */
function totalCpuPerItem(cpu: CpuUsage, items: number): number {
  return [...cpuPerItem(cpu, items).values()].reduce((sum, value) => sum + value, 0);
}

/** "api 0.152, worker process(es) 0.469, ...": CPU milliseconds per item, by process. */
export function cpuPerItemText(cpu: CpuUsage, items: number): string {
  return [...cpuPerItem(cpu, items)].map(([label, ms]) => `${label} ${ms.toFixed(3)}`).join(", ");
}

function cpuCell(cpu: CpuUsage): string {
  return `${cpu.cores.map((c) => `${c.label} ${c.cores.toFixed(2)}`).join(", ")}; machine ${cpu.machineCores.toFixed(2)}`;
}

/** The processes on the machine that were not ours, with the cores each used (at least 0.02). */
function othersCell(cpu: CpuUsage): string {
  const others = cpu.others
    .filter((entry) => entry.cores >= 0.02)
    .map((entry) => `${entry.command} ${entry.cores.toFixed(2)}`);
  return others.length ? others.join(", ") : "-";
}

const layerShare = (profile: ProfileSummary | undefined, name: RegExp) =>
  profile?.byLayer.filter((l) => name.test(l.layer)).reduce((sum, l) => sum + l.share, 0);

export function layersTable(profile: ProfileSummary | undefined): string {
  if (!profile) return "_(no profile was written)_";
  const shown = profile.byLayer.filter((layer) => layer.share >= 0.005);
  const rest = profile.byLayer.filter((layer) => layer.share < 0.005).reduce((sum, layer) => sum + layer.share, 0);
  const rows = shown.map((layer) => [layer.layer, pct(layer.share)]);
  if (rest > 0) rows.push(["other packages", pct(rest)]);
  return table(
    ["layer (each CPU sample charged to the nearest package, or our code, on its stack)", "share of samples"],
    rows,
  );
}

export function hottestTable(profile: ProfileSummary | undefined, method: "perf" | "v8", count = 8): string {
  if (!profile) return "";
  const rows = profile.topFunctions
    .slice(0, count)
    .map((f) => [`\`${f.name.replace(/\|/g, "\\|")}\``, f.owner, pct(f.share)]);
  // perf: a sample in native code or in the kernel counts for the nearest JS frame above it.
  return table(
    [
      method === "perf" ? "hottest JS functions (nearest JS frame)" : "hottest functions (self time)",
      "package",
      "share of samples",
    ],
    rows,
  );
}

/** Section 5, also printed on its own by `npm run bench -- --only noisy`. */
export function noisySection(n: NoisyNeighbourResult): string[] {
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
    table(
      ["healthy subscription", "p50", "p99", "max", "slowest delivered", "delivered", "CPU (cores) by process"],
      [row("part 1: alone", n.alone), row(`part 2: beside ${noiseDeliveries} failing deliveries/s`, n.beside)],
    ),
    `Default settings, one API and one worker; type A open loop at ${s.healthyRatePerSecond}/s to the verifying receiver (${s.aloneMs / 1000} s alone, ` +
      `${s.besideMs / 1000} s beside type B at ${s.noiseRatePerSecond}/s to 10 failing endpoints), from scheduled send to verified receipt; target: p99 beside <= ${TARGETS.noisyP99Factor}x alone.`,
    table(
      ["failing endpoints (part 2)", "requests received", "most requests open at once"],
      [
        [
          `${s.hangingReceivers} that never answer`,
          `${round(sum(n.hangingRequests))} (${n.hangingRequests.join(", ")})`,
          `${Math.max(...n.hangingPeakOpen)} at one endpoint (each: ${n.hangingPeakOpen.join(", ")}); ${n.hangingPeakOpenTogether} across the ${s.hangingReceivers}`,
        ],
        [
          `${s.erroringReceivers} that answer 500`,
          `${round(sum(n.erroringRequests))} (${n.erroringRequests.join(", ")})`,
          "-",
        ],
      ],
    ),
    `${round(n.noiseSent)} B events published${n.noiseRejected ? ` (${n.noiseRejected} not accepted)` : ""}, each one delivery per failing endpoint; invalid signatures ${n.invalidSignatures}.`,
    table(
      ["waits at the gate in part 2, by reason", "deliveries", "what each cost"],
      WAIT_REASONS.map((reason) => [
        `\`${reason}\``,
        round(n.besideWaits[reason] ?? 0),
        reason === "in_line"
          ? "a pre-check; a claim, taken back, where the worker did not know of the line"
          : "a claim, taken back",
      ]),
    ),
    "The worker's webhook_delivery_waits_total over part 2. A held subscription (`circuit_open`, `retry_after`) wakes nobody early, so few claims should find it held.",
    table(
      ["hand-off (max_in_flight 1)", "deliveries", "p50", "p99", "max", "most requests at once"],
      [
        [
          `receiver answers after ${s.handoff.serviceMs} ms`,
          round(n.handoff.deliveries),
          fmt(n.handoff.gap.p50),
          fmt(n.handoff.gap.p99),
          fmt(n.handoff.gap.max),
          String(n.handoff.peakOpen),
        ],
      ],
    ),
    "From the receiver's answer to the next waiting delivery's request: the hand-off's own work, nothing polls.",
  ];
}

export function renderReport(r: BenchResults): string {
  const v = verdicts(r);
  const { best, ceiling, latency, latencyBelowCapacity: lowRate, list, profiles } = r;
  const productCpu = cpuPerItem(best.cpu, best.deliveries);
  const ceilingCpu = cpuPerItem(ceiling.cpu, ceiling.jobs);
  const productTotal = totalCpuPerItem(best.cpu, best.deliveries);
  const ceilingTotal = totalCpuPerItem(ceiling.cpu, ceiling.jobs);
  const apiCpuPerEvent = (productCpu.get("api") ?? 0) * settings.throughput.subscriptions;
  const db = best.database;
  const seconds = (r.finishedAt.getTime() - r.startedAt.getTime()) / 1000;
  const pg = profiles?.postgres;

  const blocks: string[] = [];
  const add = (...parts: string[]) => blocks.push(...parts.filter((part) => part !== ""));

  add(
    "# Benchmarks",
    `Written by \`npm run bench\` (apps/bench/src) on ${r.startedAt.toISOString()} in ${Math.round(seconds)} s, all on one machine over loopback: ` +
      `**${r.machine.cores} cores** (os.availableParallelism()), ${r.machine.cpuModel}, ${r.machine.memoryGb} GB RAM, ${r.machine.platform}; ` +
      `**Node ${r.machine.node}**, ${r.machine.postgres}, Redis ${r.machine.redis}; commit ${r.machine.commit.replace(/\|/g, "/")}.`,
  );

  add(
    "## Results against the targets",
    table(
      ["figure", "measured", "target", "met"],
      v.map((x) => [x.figure, x.measured, x.target, yesNo(x.met)]),
    ),
    `A delivery costs ${productTotal.toFixed(2)} ms of CPU across all processes, ${(productTotal / ceilingTotal).toFixed(1)}x the bare ceiling's` +
      (ceiling.perSecond < TARGETS.deliveriesPerSecond
        ? `; the ceiling itself is below ${round(TARGETS.deliveriesPerSecond)}/s on this machine.`
        : "."),
  );

  const notRun = r.skipped.map((skip) => [
    `W10 and W1`,
    `${skip.workers} x ${skip.concurrency}`,
    `not run: ${skip.reason}`,
    ...Array<string>(9).fill("-"),
  ]);
  add(
    "## 1. End-to-end throughput",
    table(
      [
        "workload",
        "setup",
        "deliveries/s",
        "seconds",
        "publishing took",
        "all `delivered` in PostgreSQL after",
        "invalid signatures",
        "duplicates",
        "queued listed by API",
        "peak DB connections",
        "CPU (cores) by process",
        "other processes (cores)",
      ],
      [
        ...r.throughput.map((t) => [
          `${t.workload} (${round(t.events)} events, ${t.publishers} publishers)`,
          `${t.workers} x ${t.concurrency}${t === best || t === r.bestW1 ? " (best)" : ""}`,
          `${round(t.perSecond)}${t.timedOut ? " (timed out)" : ""}`,
          t.seconds.toFixed(1),
          `${t.publishSeconds.toFixed(1)} s${t.publishRejected ? ` (${t.publishRejected} rejected)` : ""}`,
          t.recordedSeconds === undefined
            ? `not reached: ${JSON.stringify(t.databaseStatuses)}`
            : `${t.recordedSeconds.toFixed(1)} s`,
          String(t.invalidSignatures),
          String(t.duplicates),
          String(t.queuedListedByApi),
          String(t.peakConnections),
          cpuCell(t.cpu),
          othersCell(t.cpu),
        ]),
        ...notRun,
      ],
    ),
    `${round(settings.throughput.events * settings.throughput.subscriptions)} deliveries per run (W10: each event to all ${settings.throughput.subscriptions} subscriptions; W1: to one), ` +
      `${round(settings.throughput.deliveriesInFlight)} in flight from the publishers, first publish to last verified delivery, setups as worker processes x WORKER_CONCURRENCY, on ` +
      `${round(settings.throughput.historyDeliveries)} delivered deliveries (analyzed); target >= ${round(TARGETS.deliveriesPerSecond)}/s.`,
  );

  add(
    "## 2. Publish -> receive latency",
    table(
      [
        "rate",
        "p50",
        "p99",
        "max",
        "until the 202: p50 / p99",
        "from the 202 to receipt: p50 / p99",
        "sent/s",
        "accepted/s",
        "delivered/s",
        "missing",
        "invalid signatures",
        "CPU per event",
        "CPU (cores) by process",
      ],
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
        `${((l.cpu.cores.reduce((sum, c) => sum + c.cores, 0) * 1000) / l.targetRate).toFixed(2)} ms`,
        cpuCell(l.cpu),
      ]),
    ),
    `Open loop for ${settings.latency.durationMs / 1000} s after a ${settings.latency.warmupMs / 1000} s warm-up, from the scheduled send to the verified receipt, ` +
      `setup ${best.workers} x ${best.concurrency}; target p50 <= ${TARGETS.latencyP50Ms} ms, p99 <= ${TARGETS.latencyP99Ms} ms at ${latency.targetRate}/s (${lowRate.targetRate}/s for reference).`,
  );

  add(
    "## 3. `GET /v1/deliveries` on 1,000,000 deliveries",
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
    `${settings.list.requestsPerCase} requests per case, one at a time, on a database seeded in ${list.seedSeconds.toFixed(0)} s; CPU per request: API ` +
      `${list.apiCpuMsPerRequest.toFixed(2)} ms, PostgreSQL ${list.postgresCpuMsPerRequest.toFixed(2)} ms; target p99 <= ${TARGETS.listP99Ms} ms.`,
    list.apiProfile ? layersTable(list.apiProfile) : "",
    list.apiProfile ? "CPU profile of the API serving the same requests (a separate pass)." : "",
  );

  add(
    "## 4. The bare ceiling",
    table(
      [
        "jobs",
        "seconds",
        "jobs/s",
        "invalid signatures",
        "rows updated",
        "CPU (cores) by process",
        "other processes (cores)",
      ],
      [
        [
          round(ceiling.jobs),
          ceiling.seconds.toFixed(1),
          `**${round(ceiling.perSecond)}**${ceiling.timedOut ? " (timed out)" : ""}`,
          String(ceiling.invalidSignatures),
          round(ceiling.rowsUpdated),
          cpuCell(ceiling.cpu),
          othersCell(ceiling.cpu),
        ],
      ],
    ),
    `BullMQ + undici + one pg UPDATE per job, signed and verified as the product's, ${ceiling.workers} x ${ceiling.concurrency}; the denominator of the share-of-ceiling targets.`,
  );

  add(...w1ShareSection(r.w1Share));

  add(...noisySection(r.noisy));
  add(...backlogSection(r.backlog));
  add(...fanOutSection(r.fanOut));
  add(...retentionSection(r.retention));

  const labels = [...new Set([...productCpu.keys(), ...ceilingCpu.keys()])];
  add(
    "## Where the time goes",
    table(
      ["process", "product, best setup: ms of CPU per delivery", "bare ceiling: ms of CPU per job"],
      [
        ...labels.map((label) => [
          label,
          (productCpu.get(label) ?? 0).toFixed(3),
          (ceilingCpu.get(label) ?? 0).toFixed(3),
        ]),
        ["**total**", `**${productTotal.toFixed(2)}**`, `**${ceilingTotal.toFixed(2)}**`],
      ],
    ),
    `CPU from /proc over phases 1 and 4; the API's part is publishing, ${apiCpuPerEvent.toFixed(2)} ms per \`POST /v1/events\`; the setups of phase 1 differ by ${(setupSpread(r.throughput) * 100).toFixed(0)}%.`,
  );

  if (profiles) add(...profileSections(profiles));
  else add("### Profiles", NOT_PROFILED);

  add(
    "### PostgreSQL",
    table(
      [
        "transactions per delivery (best run)",
        "`deliveries` rows updated per delivery",
        "of those HOT",
        "indexes on `deliveries`",
        "fillfactor",
      ],
      [
        [
          (db.transactions / best.deliveries).toFixed(2),
          (db.deliveryUpdates / best.deliveries).toFixed(2),
          pct(hotShare(db)),
          String(db.deliveryIndexes),
          String(db.deliveryFillfactor),
        ],
      ],
    ),
    "Besides one insert each into `deliveries` and `delivery_attempts`.",
    pg ? postgresStagesTable(pg) : "",
    pg
      ? `Machine-wide \`perf record\` of the profiled run: PostgreSQL's backends in ${pct(pg.backendShareOfMachine)} of all samples.`
      : "",
  );

  add("### What this means, and what would fix it", table(["finding", "this run, and the fix"], findings(r)));
  return `${blocks.join("\n\n")}\n`;
}

const NOT_PROFILED =
  "Not profiled in this run. `npm run bench -- --profile` adds a shorter, profiled run of phase 1 (Linux perf, or `node --cpu-prof` " +
  "without it) and a profile of the API serving phase 3's requests, with the breakdown of the worker's, the API's and PostgreSQL's CPU here.";

/** Phase 4b's rounds, the median in bold. */
export function w1ShareSection(w: W1ShareResult): string[] {
  return [
    "## 4b. W1 against the bare ceiling, back to back",
    table(
      [
        "round",
        `W1 deliveries/s (${w.median.w1.publishers} publishers)`,
        "bare ceiling jobs/s",
        "share",
        "W1: ms of CPU per delivery",
        "ceiling: ms of CPU per job",
        `W1 with ${w.median.w1FewPublishers.publishers} publishers (not the verdict's): deliveries/s, share, ms of CPU per delivery`,
      ],
      w.rounds.map((each, index) => [
        String(index + 1),
        `${round(each.w1.perSecond)}${each.w1.timedOut ? " (timed out)" : ""}`,
        `${round(each.ceiling.perSecond)}${each.ceiling.timedOut ? " (timed out)" : ""}`,
        each === w.median ? `**${(each.share * 100).toFixed(0)}%**` : `${(each.share * 100).toFixed(0)}%`,
        totalCpuPerItem(each.w1.cpu, each.w1.deliveries).toFixed(2),
        totalCpuPerItem(each.ceiling.cpu, each.ceiling.jobs).toFixed(2),
        `${round(each.w1FewPublishers.perSecond)}${each.w1FewPublishers.timedOut ? " (timed out)" : ""}, ${(each.shareFewPublishers * 100).toFixed(0)}%, ` +
          totalCpuPerItem(each.w1FewPublishers.cpu, each.w1FewPublishers.deliveries).toFixed(2),
      ]),
    ),
    `W1's best setup (${w.workers} x ${w.concurrency}). Each round runs W1 with ${w.median.w1FewPublishers.publishers} publishers (W10's), W1, then the ceiling at once: ` +
      "the host's speed changes within minutes. The verdict reads the median round (bold). CPU of all processes.",
  ];
}

/** Where the worker's and the API's CPU goes, from the profiled run (--profile). */
function profileSections(p: Profiles): string[] {
  const overhead = p.queryOverhead;
  const blocks: string[] = [];
  const add = (...parts: string[]) => blocks.push(...parts.filter((part) => part !== ""));
  const method =
    p.method === "perf"
      ? `Linux \`perf record\` (machine-wide, 499 Hz, call graphs; samples charged to the nearest package on the stack)`
      : "`node --cpu-prof` of the first worker (perf unavailable; samples pile up on socket writes, so those shares overstate CPU)";
  add(
    "### Worker process",
    layersTable(p.worker),
    `${method} of a shorter phase 1 (${round(settings.profile.events)} events, ${round(p.run.deliveries)} deliveries, ${round(p.run.perSecond)}/s while profiled)` +
      (p.kernelShare.worker !== undefined
        ? `; ${pct(p.kernelShare.worker)} of the worker's samples in the kernel.`
        : "."),
    hottestTable(p.worker, p.method),
    table(
      ["`SELECT 1`, one at a time, in the benchmark process", "CPU per query", "time per query"],
      [
        ["Prisma `$queryRaw`", `${overhead.prisma.cpuUs.toFixed(0)} us`, ms(overhead.prisma.meanMs)],
        ["node-postgres", `${overhead.pg.cpuUs.toFixed(0)} us`, ms(overhead.pg.meanMs)],
      ],
    ),
    "The delivery path (publish, claim, record) runs on node-postgres; everything else goes through Prisma.",
  );
  add(
    "### API process (publishing)",
    layersTable(p.api),
    `Same run, the API process${p.kernelShare.api !== undefined ? ` (${pct(p.kernelShare.api)} of its samples in the kernel)` : ""}.`,
    hottestTable(p.api, p.method),
  );
  return blocks;
}

/**
 * The reading of the figures, one row each: computed from this run's data, saying only what the
 * data shows; the fixes name the code the profiles point at.
 */
function findings(r: BenchResults): string[][] {
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
  const stage = (label: RegExp) =>
    pg?.stages.filter((st) => label.test(st.label)).reduce((sum, st) => sum + st.share, 0);
  const parsePlan = stage(/^(parse|analyze|plan)/);
  const indexShare = stage(/index maintenance/);
  const perDelivery = db.transactions / best.deliveries;
  const claimsHot = Math.min(1, db.deliveryHotUpdates / best.deliveries);
  const apiCpuPerEvent = (product.get("api") ?? 0) * settings.throughput.subscriptions;
  const listCases = list.cases.filter((c) => !c.reference);
  const reference = list.cases.find((c) => c.reference);
  const deep = deepExtra(listCases);
  const rows: string[][] = [];

  rows.push([
    "**CPU per delivery sets the throughput**",
    `${productTotal.toFixed(2)} ms against ${bareTotal.toFixed(2)} ms for the bare loop` +
      (extra.length
        ? ` (${extra.map((e) => `${e.label} ${e.extra > 0 ? "+" : ""}${e.extra.toFixed(2)} ms`).join(", ")})`
        : "") +
      "; " +
      `${r.machine.cores} cores give at most ${round((r.machine.cores * 1000) / productTotal)}/s; ${round(TARGETS.deliveriesPerSecond)}/s needs ` +
      `${((r.machine.cores * 1000) / TARGETS.deliveriesPerSecond).toFixed(2)} ms${bareTotal > (r.machine.cores * 1000) / TARGETS.deliveriesPerSecond ? ", less than the bare loop costs here" : ""}`,
  ]);
  if (worker) {
    rows.push([
      "**Worker**",
      `${top(worker, 5)}; ${perDelivery.toFixed(2)} transactions per delivery (claims and records batched on node-postgres)` +
        (layerShare(worker, /BullMQ/)! > 0.15
          ? `; BullMQ's Redis traffic ${pct(layerShare(worker, /BullMQ/))}, as in the bare loop: only fewer jobs per delivery would cut it`
          : ""),
    ]);
  }
  if (pg && parsePlan !== undefined) {
    rows.push(
      parsePlan > 0.15
        ? [
            "**PostgreSQL parses and plans every statement**",
            `${pct(parsePlan)} of backend CPU; prepared statements (\`statementNameGenerator\` on \`PrismaPg\`, packages/db/src/client.ts) would plan once per connection`,
          ]
        : [
            "**PostgreSQL's statements are prepared**",
            `parse and plan ${pct(parsePlan)}, execute ${pct(stage(/^execute/))} (index maintenance ${pct(indexShare)}), commit ${pct(stage(/^commit/))} of backend CPU`,
          ],
    );
  }
  rows.push([
    "**Index maintenance**",
    `${pct(hotShare(db))} of \`deliveries\` updates HOT (recording changes indexed columns; claims HOT ${pct(claimsHot)}, fillfactor ${db.deliveryFillfactor}); ` +
      `${db.deliveryIndexes} indexes, four of them for the list's filters` +
      (indexShare !== undefined ? `, ${pct(indexShare)} of PostgreSQL's CPU` : "") +
      (claimsHot < 0.9 && db.deliveryFillfactor >= 100 ? "; a fillfactor of 80 would leave claims room to be HOT" : ""),
  ]);
  rows.push([
    "**Publishing**",
    `${apiCpuPerEvent.toFixed(2)} ms of API CPU per event${api ? ` (${top(api, 5)})` : ""}; phase 2 accepted ${round(latency.acceptedRate)} of ${latency.targetRate}/s; ` +
      `at ${lowRate.targetRate}/s the 202 takes ${ms(lowRate.publish.p50)} and the rest ${ms(lowRate.afterAccept.p50)} (p50); ` +
      "concurrent publishes are batched (packages/db/src/events.ts), a steady trickle is not",
  ]);
  if (layerShare(worker, /ulid/)! > 0.01 || layerShare(api, /ulid/)! > 0.01) {
    rows.push([
      "**ulid**",
      `worker ${pct(layerShare(worker, /ulid/))}, API ${pct(layerShare(api, /ulid/))}: one OS random byte per character; \`monotonicFactory(prng)\` with a pooled PRNG`,
    ]);
  }
  if (r.skipped.length > 0) {
    rows.push([
      "**Connections**",
      `${r.skipped.map((skip) => `${skip.workers} x ${skip.concurrency}: ${skip.reason}`).join("; ")}; at most ${Math.max(...r.throughput.map((t) => t.peakConnections))} open in phase 1; a pooler (PgBouncer) lets more processes share the server`,
    ]);
  }
  rows.push([
    "**Listing**",
    `${ms(Math.min(...listCases.map((c) => c.executionMs)))} to ${ms(Math.max(...listCases.map((c) => c.executionMs)))} in PostgreSQL, ` +
      `${ms(Math.min(...listCases.map((c) => c.latency.p50)))} to ${ms(Math.max(...listCases.map((c) => c.latency.p50)))} per request at p50, ` +
      `${list.apiCpuMsPerRequest.toFixed(2)} ms of API CPU${list.apiProfile ? ` (${top(list.apiProfile, 3)})` : ""}` +
      (deep > 0.2 ? `; a deep page costs ${ms(deep)} more (the cursor check, packages/db/src/paging.ts)` : "") +
      (reference ? `; \`GET /healthz\` p99 ${ms(reference.latency.p99)}, the machine's share of the tail` : ""),
  ]);
  return rows;
}

function hotShare(db: ThroughputResult["database"]): number {
  return db.deliveryUpdates ? db.deliveryHotUpdates / db.deliveryUpdates : 0;
}

/** How much slower, at p50, the deep-page cases are than the same filters on the first page. */
function deepExtra(cases: { name: string; latency: { p50: number } }[]): number {
  const deep = cases.filter((c) => c.name.startsWith("deep page"));
  const shallow = cases.filter((c) => !c.name.startsWith("deep page"));
  const mean = (list: { latency: { p50: number } }[]) =>
    list.reduce((sum, c) => sum + c.latency.p50, 0) / Math.max(1, list.length);
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
