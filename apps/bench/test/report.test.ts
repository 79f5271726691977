// Renders BENCHMARKS.md from made-up figures, with and without --profile's sections, so the
// report's code is checked without a 14-minute run: every section, every table row, no NaN.
import { describe, expect, it } from "vitest";
import type { CpuUsage } from "../src/cpu-usage.ts";
import type { ThroughputResult } from "../src/phases/throughput.ts";
import type { ProfileSummary } from "../src/profiling/profile.ts";
import { type BenchResults, renderReport } from "../src/report.ts";
import { retentionVerdicts } from "../src/report-scale.ts";
import type { Summary } from "../src/stats.ts";

const cpu = (machineCores = 1.8): CpuUsage => ({
  seconds: 10,
  cores: [
    { label: "api", cores: 0.4 },
    { label: "worker-1", cores: 0.6 },
    { label: "postgres", cores: 0.5 },
    { label: "redis", cores: 0.1 },
    { label: "bench (publisher+receiver)", cores: 0.2 },
  ],
  machineCores,
  others: [{ command: "cc1plus", cores: 0.05 }],
});
const summary = (p50: number): Summary => ({ count: 1000, p50, p99: p50 * 3, max: p50 * 5 });

function throughput(
  workload: "W10" | "W1",
  workers: number,
  concurrency: number,
  perSecond: number,
  publishers = workload === "W10" ? 16 : 160,
): ThroughputResult {
  return {
    workload,
    publishers,
    workers,
    concurrency,
    events: workload === "W10" ? 2_000 : 20_000,
    deliveries: 20_000,
    seconds: 20_000 / perSecond,
    perSecond,
    publishSeconds: 3.2,
    publishRejected: 0,
    invalidSignatures: 0,
    duplicates: 0,
    databaseStatuses: { delivered: 20_000 },
    recordedSeconds: 8.1,
    queuedListedByApi: 0,
    peakConnections: 24,
    timedOut: false,
    cpu: cpu(),
    database: {
      transactions: 9_000,
      rowsInserted: 42_000,
      rowsUpdated: 40_000,
      deliveryUpdates: 40_000,
      deliveryHotUpdates: 19_000,
      deliveryIndexes: 7,
      deliveryFillfactor: 100,
    },
    windowUs: { fromUs: 0, toUs: 1 },
    pids: { api: 1, workers: [2] },
  };
}

const profile: ProfileSummary = {
  file: "worker.cpuprofile",
  busyMs: 5_000,
  byOwner: [{ owner: "our code", ms: 1_000, share: 0.2 }],
  byLayer: [
    { layer: "BullMQ", share: 0.2 },
    { layer: "pg", share: 0.15 },
    { layer: "ulid", share: 0.02 },
    { layer: "our code", share: 0.1 },
    { layer: "tiny", share: 0.001 },
  ],
  topFunctions: [{ name: "writev|x", owner: "Node.js internals", ms: 300, share: 0.06 }],
};

function results(withProfiles: boolean): BenchResults {
  const best = throughput("W10", 1, 100, 1_900);
  const bestW1 = throughput("W1", 2, 50, 1_500);
  const ceiling = {
    workers: 1,
    concurrency: 100,
    jobs: 20_000,
    seconds: 5,
    perSecond: 4_000,
    invalidSignatures: 0,
    rowsUpdated: 20_000,
    timedOut: false,
    cpu: cpu(),
  };
  // Three rounds of W1 and the ceiling back to back: 50%, 64% and 55%, so the median is the third.
  const w1Rounds = [
    {
      w1FewPublishers: throughput("W1", 2, 50, 800, 16),
      w1: throughput("W1", 2, 50, 1_000),
      ceiling: { ...ceiling, perSecond: 2_000 },
      share: 0.5,
      shareFewPublishers: 0.4,
    },
    {
      w1FewPublishers: throughput("W1", 2, 50, 900, 16),
      w1: throughput("W1", 2, 50, 1_280),
      ceiling: { ...ceiling, perSecond: 2_000 },
      share: 0.64,
      shareFewPublishers: 0.45,
    },
    {
      w1FewPublishers: throughput("W1", 2, 50, 850, 16),
      w1: throughput("W1", 2, 50, 1_100),
      ceiling: { ...ceiling, perSecond: 2_000 },
      share: 0.55,
      shareFewPublishers: 0.425,
    },
  ];
  const drain = { deliveries: 60_000, seconds: 60, perSecond: 1_000, timedOut: false, cpu: cpu() };
  const window = (label: string, pruning: boolean) => ({
    label,
    pruning,
    seconds: 45,
    publish: summary(3),
    publishRejected: 0,
    list: summary(2),
    listErrors: 0,
    cpu: cpu(),
    wal: { megabytesPerSecond: pruning ? 10 : 0.4, fullPageImagesPerSecond: pruning ? 1_200 : 20 },
    deleted: { deliveries: pruning ? 9_000_000 : 0, attempts: pruning ? 9_500_000 : 0, events: pruning ? 900_000 : 0 },
    workerSeconds: 60,
  });
  const run = (p50: number) => ({
    sent: 500,
    rejected: 0,
    delivered: 500,
    latency: summary(p50),
    slowestDelivered: p50 * 4,
    slowestSentAt: [1, 2, 3],
    cpu: cpu(),
  });
  return {
    startedAt: new Date("2026-11-23T12:00:00Z"),
    finishedAt: new Date("2026-11-23T12:14:00Z"),
    machine: {
      cores: 2,
      cpuModel: "Test CPU",
      memoryGb: 8,
      node: "20.19.0",
      postgres: "PostgreSQL 16.4",
      redis: "7.2.4",
      platform: "linux 6.1",
      commit: "abc1234 | a message",
    },
    throughput: [best, bestW1, throughput("W10", 2, 25, 1_700)],
    skipped: [{ workers: 2, concurrency: 50, reason: "too few PostgreSQL connections" }],
    best,
    bestW1,
    ceiling,
    w1Share: { workers: 2, concurrency: 50, rounds: w1Rounds, median: w1Rounds[2]! },
    latency: {
      workers: 1,
      concurrency: 100,
      targetRate: 500,
      achievedSendRate: 499,
      acceptedRate: 420,
      achievedDeliveryRate: 410,
      endToEnd: summary(30),
      publish: summary(20),
      afterAccept: summary(8),
      missing: 0,
      rejected: 0,
      invalidSignatures: 0,
      cpu: cpu(),
    },
    latencyBelowCapacity: {
      workers: 1,
      concurrency: 100,
      targetRate: 100,
      achievedSendRate: 100,
      acceptedRate: 100,
      achievedDeliveryRate: 100,
      endToEnd: summary(6),
      publish: summary(2),
      afterAccept: summary(4),
      missing: 0,
      rejected: 0,
      invalidSignatures: 0,
      cpu: cpu(),
    },
    list: {
      deliveries: 1_000_000,
      seedSeconds: 40,
      cases: [
        {
          name: "no filter",
          query: "/v1/deliveries",
          reference: false,
          latency: summary(2),
          rows: 20,
          plan: "Index Scan",
          indexScan: true,
          executionMs: 0.2,
        },
        {
          name: "deep page, no filter",
          query: "/v1/deliveries?cursor=x",
          reference: false,
          latency: summary(2.5),
          rows: 20,
          plan: "Index Scan",
          indexScan: true,
          executionMs: 0.3,
        },
        {
          name: "event filter",
          query: "/v1/deliveries?event=x",
          reference: false,
          latency: summary(3),
          rows: 20,
          plan: "Seq Scan",
          indexScan: false,
          executionMs: 0.9,
        },
        {
          name: "GET /healthz",
          query: "/healthz",
          reference: true,
          latency: summary(0.5),
          rows: 0,
          plan: "-",
          indexScan: true,
          executionMs: Number.NaN,
        },
      ],
      apiCpuMsPerRequest: 1.2,
      postgresCpuMsPerRequest: 0.4,
      apiProfile: withProfiles ? profile : undefined,
    },
    profiles: withProfiles
      ? {
          method: "perf",
          run: best,
          api: profile,
          worker: profile,
          postgres: {
            backendShareOfMachine: 0.3,
            stages: [
              { label: "parse/analyze/plan", share: 0.1 },
              { label: "execute", share: 0.6 },
              { label: "execute: index maintenance", share: 0.2 },
              { label: "commit", share: 0.1 },
            ],
          },
          kernelShare: { api: 0.2, worker: 0.25 },
          queryOverhead: { prisma: { cpuUs: 180, meanMs: 0.4 }, pg: { cpuUs: 60, meanMs: 0.15 } },
        }
      : undefined,
    noisy: {
      alone: run(5),
      beside: run(6),
      noiseSent: 200,
      noiseRejected: 0,
      hangingPeakOpen: [10, 10, 10, 10, 10],
      hangingPeakOpenTogether: 50,
      hangingRequests: [40, 40, 40, 40, 40],
      erroringRequests: [80, 80, 80, 80, 80],
      invalidSignatures: 0,
      handoff: { deliveries: 200, gap: summary(1.5), peakOpen: 1 },
      besideWaits: { in_line: 2062, circuit_open: 5 },
    },
    fanOut: {
      subscriptions: 10_000,
      acceptMs: [300, 280, 290],
      acceptMedianMs: 290,
      deliveredMs: [9_000, 8_800, Number.POSITIVE_INFINITY],
      deliveredMedianMs: 9_000,
      allDelivered: false,
      duplicates: 0,
      invalidSignatures: 0,
    },
    backlog: {
      workers: 1,
      concurrency: 100,
      deliveries: 1_000_000,
      seedSeconds: 60,
      enqueueSeconds: 90,
      redisBytesBefore: 10 * 1024 ** 2,
      redisBytesAfter: 700 * 1024 ** 2,
      firstPass: { seconds: 12, scanned: 1_000_000, enqueued: 0, cpu: cpu() },
      idle: { seconds: 40, passes: 4, scanned: 400, enqueued: 0, cpu: cpu(0.1) },
      drain: {
        ...drain,
        slices: [10_000, 10_000, 10_000, 10_000, 10_000, 10_000],
        invalidSignatures: 0,
        duplicates: 0,
      },
      reference: { ...drain, deliveries: 30_000, seconds: 29 },
    },
    retention: {
      seeded: {
        deliveries: 10_000_000,
        attempts: 11_000_000,
        events: 1_000_000,
        prunable: 9_000_000,
        bytes: 6 * 1024 ** 3,
        seconds: 300,
        steps: { loadSeconds: 200, indexSeconds: 80, vacuumSeconds: 20 },
      },
      windows: [
        window("without pruning (1)", false),
        window("pruning (1, RETENTION=3d)", true),
        window("without pruning (2)", false),
        window("pruning (2, RETENTION=3d)", true),
        window("without pruning (3)", false),
      ],
    },
  };
}

describe("BENCHMARKS.md", () => {
  for (const withProfiles of [false, true]) {
    it(`renders every section and table ${withProfiles ? "with" : "without"} the profiles`, () => {
      const report = renderReport(results(withProfiles));
      for (const heading of [
        "# Benchmarks",
        "## Results against the targets",
        "## 1. ",
        "## 2. ",
        "## 3. ",
        "## 4. ",
        "## 4b. ",
        "## 5. ",
        "## 6. ",
        "## 7. ",
        "## 8. ",
        "## Where the time goes",
        "### PostgreSQL",
        "### What this means",
      ]) {
        expect(report).toContain(heading);
      }
      expect(report).not.toMatch(/NaN|undefined|\[object/);
      expect(report).toContain("| W1 (20,000 events, 160 publishers) | 2 x 50 (best) | 1,500 |");
      expect(report).toContain("not run: too few PostgreSQL connections");
      // W1's verdict reads the median round of phase 4b, not the best setup's run against the ceiling.
      expect(report).toContain("1,100/s = 55% of the bare ceiling (2,000/s), the median of 3 rounds: 50%, 64%, 55%");
      expect(report).toContain("| 3 | 1,100 | 2,000 | **55%** |");
      expect(report).toContain("| 850, 43%, ");
      // Tables, and at most one short line of prose under each.
      const blocks = report.trimEnd().split("\n\n");
      const prose = (block: string) => !/^(\||#)/.test(block);
      blocks.forEach((block, i) => {
        if (!prose(block)) return;
        expect(block.length, block).toBeLessThanOrEqual(300);
        expect(i > 0 && prose(blocks[i - 1]!), block).toBe(false);
      });
      if (withProfiles) expect(report).toContain("### Worker process");
      else expect(report).toContain("Not profiled in this run");
    });
  }
});

describe("the retention verdicts", () => {
  const window = (pruning: boolean, publishP99: number, listP99: number) => ({
    label: pruning ? "pruning" : "quiet",
    pruning,
    seconds: 45,
    publish: { count: 4_500, p50: 2, p99: publishP99, max: publishP99 * 2 },
    publishRejected: 0,
    list: { count: 900, p50: 2, p99: listP99, max: listP99 * 2 },
    listErrors: 0,
    cpu: cpu(),
    wal: { megabytesPerSecond: 1, fullPageImagesPerSecond: 100 },
    deleted: { deliveries: 0, attempts: 0, events: 0 },
    workerSeconds: 55,
  });
  const seeded = {
    deliveries: 10_000_000,
    attempts: 12_600_000,
    events: 1_000_000,
    prunable: 8_800_000,
    bytes: 1,
    seconds: 1,
    steps: { loadSeconds: 1, indexSeconds: 0, vacuumSeconds: 0 },
  };

  it("compares the pruning windows' mean p99 with the quiet ones', against the quiet ones' spread", () => {
    // Quiet publish p99s 6, 9, 7.5 (mean 7.5, spread 3); pruning 10 and 11 (mean 10.5): +3, met.
    // Quiet list p99s 5, 5.5, 5 (mean 5.17, spread 0.5); pruning 6 and 6.5: +1.08, missed.
    const windows = [
      window(false, 6, 5),
      window(true, 10, 6),
      window(false, 9, 5.5),
      window(true, 11, 6.5),
      window(false, 7.5, 5),
    ];
    const [publish, list] = retentionVerdicts({ seeded, windows });
    expect(publish!.met).toBe(true);
    expect(publish!.measured).toBe(
      "10.5 ms (mean of 2 windows) against 7.50 ms without (mean of 3): +3.00 ms; noise (the spread of the 3 without) 3.00 ms",
    );
    expect(list!.met).toBe(false);
    // Quiet 6 and 9 (mean 7.5, spread 3); pruning 10.6: +3.1, a hair more than the spread: missed.
    expect(
      retentionVerdicts({ seeded, windows: [window(false, 6, 5), window(true, 10.6, 5), window(false, 9, 5)] })[0]!.met,
    ).toBe(false);
  });
});
