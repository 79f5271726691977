import { newId } from "@webhooks/core";
import { type TestReceiver, withClient } from "@webhooks/testing";
import { ApiClient } from "../api-client.ts";
import { dropIdleDatabases, freshDatabase } from "../databases.ts";
import { startApi, startWorker } from "../services.ts";
import { RUN_PREFIX } from "../settings.ts";
import { percentile } from "../stats.ts";
import { reportServiceOutput, subscriptionSettings, type WorkerSetup, workerEnv } from "./throughput.ts";

/** Phase 7's figures: one event to `subscriptions` matching subscriptions, `runs` times. */
export const fanOutSettings = {
  subscriptions: 10_000,
  runs: 5,
  /** Each run's deliveries must all have arrived within this. */
  deliveryTimeoutMs: 120_000,
} as const;

export interface FanOutResult {
  subscriptions: number;
  /** POST /v1/events, from sending to the 202, per run (the event and its deliveries are committed by then). */
  acceptMs: number[];
  acceptMedianMs: number;
  /** From sending the POST until the receiver had verified every delivery, per run. */
  deliveredMs: number[];
  deliveredMedianMs: number;
  /** Every run's deliveries arrived, each once, signed correctly, and PostgreSQL recorded each delivered after one attempt. */
  allDelivered: boolean;
  duplicates: number;
  invalidSignatures: number;
}

const FAN_OUT_TYPE = "fanout.created";
/**
 * Its own database, named per run like phase 6's: another benchmark starting on the same server
 * drops the shared ones. Dropped at the end; one a killed run left behind goes at the next run.
 */
const DATABASE_PREFIX = "webhooks_bench_fanout_";

/**
 * Phase 7 (issue 10 item 3): one event matched by 10,000 subscriptions. The real API and worker
 * run on a fresh database; the subscriptions all point at the receiver, each at a path of its
 * own (so the receiver can tell 10,000 deliveries of one event from duplicates). One subscription
 * is created through the API for its secret; the rest are copies of it written in one statement,
 * since 10,000 POSTs would only measure subscription creation. Each run publishes one event and
 * waits until all its deliveries have arrived and been recorded before the next, so the POST is
 * timed on an otherwise idle service.
 */
export async function measureFanOut(receiver: TestReceiver, setup: WorkerSetup): Promise<FanOutResult> {
  const { subscriptions, runs } = fanOutSettings;
  await dropIdleDatabases(DATABASE_PREFIX);
  const databaseUrl = await freshDatabase(`${DATABASE_PREFIX}${RUN_PREFIX.replace(/\W/g, "_")}`);
  const prefix = `${RUN_PREFIX}-fanout`;
  const api = await startApi(databaseUrl, prefix);
  const workers = await Promise.all(
    Array.from({ length: setup.workers }, (_, i) =>
      startWorker(`worker-${i + 1}`, databaseUrl, prefix, workerEnv(setup)),
    ),
  );
  const client = new ApiClient(api.baseUrl, 2);
  try {
    const first = await client.createSubscription(
      `${receiver.url}/fanout/0`,
      [FAN_OUT_TYPE],
      subscriptionSettings(setup),
    );
    const ids = Array.from({ length: subscriptions - 1 }, () => newId("subscription"));
    await withClient(databaseUrl, (db) =>
      db.query(
        `INSERT INTO subscriptions (id, url, events, active, secret_id, max_in_flight, headers)
         SELECT copy.id, $3 || '/fanout/' || copy.n, s.events, s.active, s.secret_id, s.max_in_flight, s.headers
         FROM subscriptions s, unnest($2::text[]) WITH ORDINALITY AS copy(id, n) WHERE s.id = $1`,
        [first.id, ids, receiver.url],
      ),
    );
    for (let i = 0; i < subscriptions; i++) receiver.useSecret(`/fanout/${i}`, first.secret);

    const acceptMs: number[] = [];
    const deliveredMs: number[] = [];
    let allDelivered = true;
    let duplicates = 0;
    let invalidSignatures = 0;
    for (let run = 0; run < runs; run++) {
      receiver.resetCounts();
      const delivered = receiver.whenVerified(subscriptions);
      const started = performance.now();
      const status = await client.publish(FAN_OUT_TYPE, { run, invoice_id: `in_fanout_${run}` });
      const accepted = performance.now();
      if (status !== 202) throw new Error(`POST /v1/events answered ${status}`);
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<undefined>(
        (resolve) => (timer = setTimeout(() => resolve(undefined), fanOutSettings.deliveryTimeoutMs)),
      );
      const finishedAt = await Promise.race([delivered, timeout]);
      clearTimeout(timer);
      acceptMs.push(accepted - started);
      deliveredMs.push((finishedAt ?? Number.NaN) - started);
      if (finishedAt === undefined) allDelivered = false;
      // The service is idle again only once the worker has recorded every attempt: the next run's
      // POST is timed then, not against the last records and health updates of this one.
      if (!(await everyDeliveryRecordedOnce(databaseUrl, (run + 1) * subscriptions))) allDelivered = false;
      duplicates += receiver.duplicates;
      invalidSignatures += receiver.invalid;
      console.log(
        `  run ${run + 1}: 202 after ${Math.round(accepted - started)} ms; ` +
          (finishedAt === undefined
            ? `only ${receiver.verified} delivered (TIMED OUT)`
            : `all ${subscriptions} delivered after ${Math.round(finishedAt - started)} ms`),
      );
    }
    const result: FanOutResult = {
      subscriptions,
      acceptMs,
      acceptMedianMs: percentile(acceptMs, 50),
      deliveredMs,
      deliveredMedianMs: percentile(deliveredMs, 50),
      allDelivered: allDelivered && duplicates === 0 && invalidSignatures === 0,
      duplicates,
      invalidSignatures,
    };
    console.log(
      `  fan-out to ${subscriptions.toLocaleString("en-US")}: accepted (202) in ${Math.round(result.acceptMedianMs)} ms median ` +
        `[${acceptMs.map(Math.round).join(", ")}], all delivered in ${Math.round(result.deliveredMedianMs)} ms median; ` +
        `duplicates ${duplicates}, invalid signatures ${invalidSignatures}`,
    );
    return result;
  } finally {
    await client.close();
    await Promise.all(workers.map((worker) => worker.stop()));
    await api.stop();
    reportServiceOutput([api, ...workers]);
  }
}

/**
 * Waits (up to 30 s) until PostgreSQL holds `expected` deliveries, each delivered after exactly
 * one attempt: every delivery was made once and recorded.
 */
async function everyDeliveryRecordedOnce(databaseUrl: string, expected: number): Promise<boolean> {
  return withClient(databaseUrl, async (db) => {
    const deadline = performance.now() + 30_000;
    for (;;) {
      const { rows } = await db.query<{ all: number; once: number }>(
        `SELECT count(*)::int AS all, (count(*) FILTER (WHERE status = 'delivered' AND attempts = 1))::int AS once FROM deliveries`,
      );
      if (rows[0]!.all === expected && rows[0]!.once === expected) return true;
      if (performance.now() > deadline) {
        console.log(
          `  PostgreSQL: ${rows[0]!.once} of ${rows[0]!.all} deliveries delivered after one attempt, ${expected} expected`,
        );
        return false;
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  });
}

/** Issue 10 item 3: one event to 10,000 matching subscriptions committed (202) in at most this. */
export const FAN_OUT_TARGET_MS = 250;

export function fanOutVerdicts(f: FanOutResult): { figure: string; measured: string; target: string; met: boolean }[] {
  return [
    {
      figure: `One event to ${f.subscriptions.toLocaleString("en-US")} subscriptions: POST /v1/events until 202 (median of ${f.acceptMs.length}; phase 7)`,
      measured: `${Math.round(f.acceptMedianMs)} ms; all delivered: ${f.allDelivered ? "yes" : "no"}`,
      target: `<= ${FAN_OUT_TARGET_MS} ms, every delivery made once`,
      met: f.acceptMedianMs <= FAN_OUT_TARGET_MS && f.allDelivered,
    },
  ];
}

/** Section 7 of BENCHMARKS.md. */
export function fanOutSection(f: FanOutResult): string[] {
  return [
    `## 7. Fan-out: one event to ${f.subscriptions.toLocaleString("en-US")} subscriptions`,
    `| run | 202 after | all delivered after |\n|---|---|---|\n${f.acceptMs
      .map(
        (accept, i) =>
          `| ${i + 1} | ${Math.round(accept)} ms | ${Number.isFinite(f.deliveredMs[i]!) ? `${Math.round(f.deliveredMs[i]!)} ms` : "not all"} |`,
      )
      .join("\n")}`,
    `One event through POST /v1/events per run, until every delivery is verified; median **${Math.round(f.acceptMedianMs)} ms** to the 202 (target <= ${FAN_OUT_TARGET_MS} ms), ` +
      `${Math.round(f.deliveredMedianMs)} ms until all were delivered; duplicates ${f.duplicates}, invalid signatures ${f.invalidSignatures}.`,
  ];
}
