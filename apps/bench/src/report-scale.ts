// The sections of BENCHMARKS.md for the phases at scale: 6 (a backlog of 1,000,000 deliveries)
// and 8 (retention on 10,000,000), with their targets (issue 10).

import type { CpuUsage } from "./cpu-usage.ts";
import type { BacklogResult, DrainRun } from "./phases/backlog.ts";
import type { LoadWindow, RetentionResult } from "./phases/retention-load.ts";
import { settings } from "./settings.ts";
import { ms, round } from "./stats.ts";

export interface ScaleVerdict {
  figure: string;
  measured: string;
  target: string;
  met: boolean;
}

export const SCALE_TARGETS = {
  /** The worker (its reconciler) while the backlog sits, as a share of one core. */
  reconcilerCoreShare: 0.05,
  /** The backlog drains at the normal throughput: at least this share of the reference drain. */
  drainShare: 0.9,
} as const;

const yesNo = (met: boolean) => (met ? "yes" : "**no**");
const pct = (share: number) => `${(share * 100).toFixed(1)}%`;

function table(header: string[], rows: string[][]): string {
  return [
    `| ${header.join(" | ")} |`,
    `|${header.map(() => "---").join("|")}|`,
    ...rows.map((row) => `| ${row.join(" | ")} |`),
  ].join("\n");
}

function coresOf(cpu: CpuUsage, label: string): number {
  return cpu.cores.find((c) => c.label.startsWith(label))?.cores ?? 0;
}

/** Milliseconds of CPU of one process over the window, divided by `count`. */
function msPer(cpu: CpuUsage, label: string, count: number): number {
  return (coresOf(cpu, label) * cpu.seconds * 1000) / Math.max(1, count);
}

function drainCpu(run: DrainRun): string {
  return `${["worker", "postgres", "redis"]
    .map((label) => `${label} ${msPer(run.cpu, label, run.deliveries).toFixed(2)}`)
    .join(", ")} ms per delivery; machine ${run.cpu.machineCores.toFixed(2)} cores busy`;
}

/** The worker's and PostgreSQL's CPU per delivery: on a shared machine, steadier than the rate. */
function pipelineCpu(run: DrainRun): number {
  return msPer(run.cpu, "worker", run.deliveries) + msPer(run.cpu, "postgres", run.deliveries);
}

export function backlogVerdicts(b: BacklogResult): ScaleVerdict[] {
  const worker = coresOf(b.idle.cpu, "worker");
  const share = b.drain.perSecond / b.reference.perSecond;
  return [
    {
      figure: `Reconciler while ${round(b.deliveries)} deliveries wait (the worker process, queue paused)`,
      measured: `${pct(worker)} of one core; ${(msPer(b.idle.cpu, "worker", b.idle.passes)).toFixed(0)} ms of CPU and ${round(b.idle.scanned / Math.max(1, b.idle.passes))} deliveries checked per pass`,
      target: `< ${SCALE_TARGETS.reconcilerCoreShare * 100}% of one core`,
      met: worker < SCALE_TARGETS.reconcilerCoreShare && b.idle.passes > 0,
    },
    {
      figure: "Drain of the backlog once the workers take jobs again",
      measured:
        `${round(b.drain.perSecond)}/s over ${b.drain.seconds.toFixed(0)} s = ${(share * 100).toFixed(0)}% of the normal throughput (${round(b.reference.perSecond)}/s); ` +
        `CPU per delivery (worker + PostgreSQL) ${pipelineCpu(b.drain).toFixed(2)} ms against ${pipelineCpu(b.reference).toFixed(2)} ms`,
      target: `>= ${SCALE_TARGETS.drainShare * 100}% of the normal throughput`,
      met: share >= SCALE_TARGETS.drainShare && !b.reference.timedOut,
    },
  ];
}

export function backlogSection(b: BacklogResult): string[] {
  const s = settings.backlog;
  const v = backlogVerdicts(b);
  const redisBytes = (b.redisBytesAfter - b.redisBytesBefore) / b.deliveries;
  const idleWorker = coresOf(b.idle.cpu, "worker");
  return [
    `## 6. A backlog of ${round(b.deliveries)} deliveries`,
    table(
      ["step", "figures"],
      [
        ["seed (SQL, indexes rebuilt after)", `${round(b.deliveries)} deliveries in ${b.seedSeconds.toFixed(0)} s`],
        [
          "enqueue into the paused queue",
          `${b.enqueueSeconds.toFixed(0)} s (${round(b.deliveries / b.enqueueSeconds)} jobs/s); Redis used_memory ${(b.redisBytesBefore / 1024 ** 2).toFixed(0)} MB -> ` +
            `${(b.redisBytesAfter / 1024 ** 2).toFixed(0)} MB = **${round(redisBytes)} bytes per waiting delivery**`,
        ],
        [
          "first reconciler pass after the worker's start (no watermark: checks everything)",
          `${round(b.firstPass.scanned)} checked, ${round(b.firstPass.enqueued)} enqueued, over in ${b.firstPass.seconds.toFixed(0)} s from the start; ` +
            `CPU: ${b.firstPass.cpu.cores.map((c) => `${c.label} ${(c.cores * b.firstPass.cpu.seconds).toFixed(1)} s`).join(", ")}`,
        ],
        [
          `the backlog sitting, ${b.idle.seconds.toFixed(0)} s`,
          `${b.idle.passes} passes, ${round(b.idle.scanned)} deliveries checked (${round(b.idle.scanned / Math.max(1, b.idle.passes))} per pass), ${round(b.idle.enqueued)} enqueued; ` +
            `worker **${pct(idleWorker)} of one core**, ${msPer(b.idle.cpu, "worker", b.idle.passes).toFixed(0)} ms of CPU per pass; PostgreSQL (our database and the ` +
            `server's background processes) ${pct(coresOf(b.idle.cpu, "postgres"))}; redis-server ${pct(coresOf(b.idle.cpu, "redis"))} (all its clients, not only ours)`,
        ],
        [
          `drain, first ${b.drain.seconds.toFixed(0)} s`,
          `**${round(b.drain.deliveries)} delivered = ${round(b.drain.perSecond)}/s** (per 10 s: ${b.drain.slices.map((n) => round(n / 10)).join(", ")}/s); ` +
            `invalid signatures ${b.drain.invalidSignatures}, duplicates ${b.drain.duplicates}; CPU: ${drainCpu(b.drain)}`,
        ],
        [
          `normal throughput: ${round(b.reference.deliveries)} queued deliveries drained in full`,
          `${b.reference.seconds.toFixed(1)} s = **${round(b.reference.perSecond)}/s**${b.reference.timedOut ? " (timed out)" : ""}; CPU: ${drainCpu(b.reference)}`,
        ],
      ],
    ),
    `${round(b.deliveries)} queued deliveries to ${s.subscriptions} subscriptions in a paused queue, one worker (${b.workers} x ${b.concurrency}) watched ${s.idleMs / 1000} s, then drained; ` +
      `targets: reconciler < ${SCALE_TARGETS.reconcilerCoreShare * 100}% of one core ${yesNo(v[0]!.met)}, drain >= ${SCALE_TARGETS.drainShare * 100}% of the normal throughput ${yesNo(v[1]!.met)}.`,
  ];
}

/**
 * How far the pruning windows' p99 (their mean) is from the quiet windows' (their mean), and the
 * noise: the spread of the quiet windows, from the lowest p99 to the highest.
 */
export function shift(
  windows: LoadWindow[],
  pick: (w: LoadWindow) => number,
): { baseline: number; noise: number; pruning: number; moved: number } {
  const mean = (values: number[]) =>
    values.length === 0 ? Number.NaN : values.reduce((sum, value) => sum + value, 0) / values.length;
  const quiet = windows.filter((w) => !w.pruning).map(pick);
  const pruning = mean(windows.filter((w) => w.pruning).map(pick));
  const baseline = mean(quiet);
  const noise = quiet.length >= 2 ? Math.max(...quiet) - Math.min(...quiet) : Number.NaN;
  return { baseline, noise, pruning, moved: pruning - baseline };
}

export function retentionVerdicts(r: RetentionResult): ScaleVerdict[] {
  const quiet = r.windows.filter((w) => !w.pruning).length;
  const pruning = r.windows.length - quiet;
  const verdict = (what: string, pick: (w: LoadWindow) => number): ScaleVerdict => {
    const m = shift(r.windows, pick);
    return {
      figure: `${what} p99 with a pruning pass running, on ${round(r.seeded.deliveries)} deliveries`,
      measured:
        `${ms(m.pruning)} (mean of ${pruning} windows) against ${ms(m.baseline)} without (mean of ${quiet}): ${m.moved >= 0 ? "+" : ""}${ms(m.moved)}; ` +
        `noise (the spread of the ${quiet} without) ${ms(m.noise)}`,
      target: "moved by no more than the noise",
      met: m.moved <= m.noise,
    };
  };
  return [verdict("Publish (to the 202)", (w) => w.publish.p99), verdict("`GET /v1/deliveries`", (w) => w.list.p99)];
}

export function retentionSection(r: RetentionResult): string[] {
  const s = settings.retention;
  const v = retentionVerdicts(r);
  const seeded = r.seeded;
  const pruning = r.windows.find((w) => w.pruning);
  const rate = (n: number, w: LoadWindow) => round(n / Math.max(0.001, w.workerSeconds));
  return [
    `## 8. Retention on ${round(seeded.deliveries)} deliveries`,
    table(
      [
        "seeded (set-based SQL)",
        "deliveries",
        "attempts",
        "events",
        "size with indexes",
        "took (rows / indexes / VACUUM ANALYZE)",
        `old enough at RETENTION=${s.retentionDays}d`,
      ],
      [
        [
          `over ${s.spanDays} days`,
          round(seeded.deliveries),
          round(seeded.attempts),
          round(seeded.events),
          `${(seeded.bytes / 1024 ** 3).toFixed(1)} GB`,
          `${seeded.seconds.toFixed(0)} s (${seeded.steps.loadSeconds.toFixed(0)} / ${seeded.steps.indexSeconds.toFixed(0)} / ${seeded.steps.vacuumSeconds.toFixed(0)} s)`,
          round(seeded.prunable),
        ],
      ],
    ),
    "88% delivered, 10% failed for good, 2% failed with a retry planned (kept whatever their age), nothing queued.",
    table(
      [
        "window",
        "publish p50",
        "publish p99",
        "list p50",
        "list p99",
        "events / list requests",
        "rows pruned (per second of the worker's run)",
        "WAL (full-page images)",
        "CPU (cores) by process",
      ],
      r.windows.map((w) => [
        w.label,
        ms(w.publish.p50),
        ms(w.publish.p99),
        ms(w.list.p50),
        ms(w.list.p99),
        `${round(w.publish.count)}${w.publishRejected ? ` (${w.publishRejected} not accepted)` : ""} / ${round(w.list.count)}${w.listErrors ? ` (${w.listErrors} errors)` : ""}`,
        w.pruning
          ? `${round(w.deleted.deliveries)} deliveries (${rate(w.deleted.deliveries, w)}/s), ${round(w.deleted.attempts)} attempts (${rate(w.deleted.attempts, w)}/s), ${round(w.deleted.events)} events in ${w.workerSeconds.toFixed(0)} s`
          : "-",
        `${w.wal.megabytesPerSecond.toFixed(1)} MB/s (${round(w.wal.fullPageImagesPerSecond)}/s)`,
        `${w.cpu.cores.map((c) => `${c.label} ${c.cores.toFixed(2)}`).join(", ")}; machine ${w.cpu.machineCores.toFixed(2)}`,
      ]),
    ),
    `Publish open loop at ${s.publishRatePerSecond}/s, list at ${s.listRatePerSecond}/s; ${s.windowMs / 1000} s windows, each after a CHECKPOINT, quiet and pruning taking turns` +
      (pruning
        ? ` (first pruning window: ${rate(pruning.deleted.deliveries + pruning.deleted.attempts + pruning.deleted.events, pruning)} rows/s)`
        : "") +
      `; targets (pruning windows' mean p99 against the quiet ones', within their spread): publish ${yesNo(v[0]!.met)}, list ${yesNo(v[1]!.met)}.`,
  ];
}
