import type { TestReceiver } from "@webhooks/testing";
import { ApiClient } from "../api-client.ts";
import { type CpuUsage, postgresTarget, startCpuWindow } from "../cpu-usage.ts";
import { freshDatabaseFor } from "../databases.ts";
import { sleep, startApi, startWorker } from "../services.ts";
import { DATABASES, RUN_PREFIX, settings } from "../settings.ts";
import { type Summary, summarize } from "../stats.ts";
import { EVENT_TYPE, reportServiceOutput, subscriptionSettings, type WorkerSetup, workerEnv } from "./throughput.ts";

export interface LatencyResult extends WorkerSetup {
  targetRate: number;
  /** Events sent in the measured window, per second of that window (after the warm-up). */
  achievedSendRate: number;
  /** Events of the measured window the API answered 202 for, per second until the last answer. */
  acceptedRate: number;
  /** Verified deliveries of measured events, per second from the window's start to the last one. */
  achievedDeliveryRate: number;
  /** Scheduled send time to the receiver's verified receipt, for the measured events. */
  endToEnd: Summary;
  /** Scheduled send time to the API's 202, for the same events. */
  publish: Summary;
  /** The API's 202 to the receiver's verified receipt, per event: queue, worker, HTTP (may be < 0). */
  afterAccept: Summary;
  /** Measured events never received within the drain timeout. */
  missing: number;
  rejected: number;
  invalidSignatures: number;
  /** CPU used while events were being sent, by process and for the whole machine. */
  cpu: CpuUsage;
}

/**
 * Phase 2: publish -> receive latency at a steady rate, open loop. Event i is due at
 * t0 + i * (1000 / rate) ms and is sent then whatever happened to the previous ones, so a slow
 * response cannot slow the sender down and hide the delay (coordinated omission); latency is
 * measured from that scheduled time, so any lateness of the sender counts against us, never for
 * us. The scheduled time travels in the event's data; publisher and receiver share this process
 * and its clock. The first `warmupMs` are sent at the same rate but not counted.
 */
export async function measureLatency(
  receiver: TestReceiver,
  setup: WorkerSetup,
  ratePerSecond: number,
  /** As measureThroughput's: the services of the code from before endpoint isolation instead. */
  options: { baseline?: string } = {},
): Promise<LatencyResult> {
  const { durationMs, warmupMs, connections, drainTimeoutMs } = settings.latency;
  const databaseUrl = await freshDatabaseFor(DATABASES.main, options.baseline);
  const prefix = `${RUN_PREFIX}-latency-${ratePerSecond}`;
  const api = await startApi(databaseUrl, prefix, {}, undefined, options.baseline);
  const workers = await Promise.all(
    Array.from({ length: setup.workers }, (_, i) =>
      startWorker(`worker-${i + 1}`, databaseUrl, prefix, workerEnv(setup), undefined, options.baseline),
    ),
  );
  const client = new ApiClient(api.baseUrl, connections);
  try {
    const path = "/latency";
    const subscription = await client.createSubscription(
      `${receiver.url}${path}`,
      [EVENT_TYPE],
      subscriptionSettings(setup, options.baseline),
    );
    receiver.useSecret(path, subscription.secret);
    receiver.resetCounts();

    const intervalMs = 1000 / ratePerSecond;
    const warmupEvents = Math.round((warmupMs / 1000) * ratePerSecond);
    const total = warmupEvents + Math.round((durationMs / 1000) * ratePerSecond);
    const endToEnd: number[] = [];
    const publish: number[] = [];
    const acceptedAt = new Map<number, number>();
    const receivedAt = new Map<number, number>();
    let lastReceivedAt = 0;
    receiver.onVerified = (webhook) => {
      const { data } = JSON.parse(webhook.body) as { data: { seq: number; scheduled_at: number } };
      if (data.seq < warmupEvents) return;
      endToEnd.push(webhook.arrivedAt - data.scheduled_at);
      receivedAt.set(data.seq, webhook.arrivedAt);
      lastReceivedAt = Math.max(lastReceivedAt, webhook.arrivedAt);
    };

    let rejected = 0;
    let settled = 0;
    let firstMeasuredSentAt = 0;
    let lastSentAt = 0;
    let lastAcceptedAt = 0;
    const endCpuWindow = startCpuWindow([
      { label: "api", processGroup: api.processGroup },
      ...workers.map((worker) => ({ label: worker.name, processGroup: worker.processGroup })),
      postgresTarget(Object.values(DATABASES)),
      { label: "redis", command: "redis-server" },
      { label: "bench (publisher+receiver)", pid: process.pid },
    ]);
    const t0 = performance.now() + 20;
    for (let seq = 0; seq < total; seq++) {
      const due = t0 + seq * intervalMs;
      const wait = due - performance.now();
      // A timer, never a busy wait: spinning until the due time would take a core from the
      // service under test on a 2-core machine. A late send still counts against the service,
      // since latency is measured from the scheduled time.
      if (wait > 0) await sleep(wait);
      const sentAt = performance.now();
      if (seq === warmupEvents) firstMeasuredSentAt = sentAt;
      lastSentAt = sentAt;
      client
        .publish(EVENT_TYPE, { seq, scheduled_at: due })
        .then(
          (status) => {
            if (status !== 202) rejected++;
            else if (seq >= warmupEvents) {
              lastAcceptedAt = performance.now();
              publish.push(lastAcceptedAt - due);
              acceptedAt.set(seq, lastAcceptedAt);
            }
          },
          () => void rejected++,
        )
        .finally(() => settled++);
    }
    const cpu = endCpuWindow();
    // Wait for the answers and the deliveries still on their way, for a bounded time.
    const measured = total - warmupEvents;
    const deadline = performance.now() + drainTimeoutMs;
    while ((settled < total || endToEnd.length < measured - rejected) && performance.now() < deadline) await sleep(10);
    receiver.onVerified = undefined;

    const windowStart = t0 + warmupEvents * intervalMs;
    const result: LatencyResult = {
      ...setup,
      targetRate: ratePerSecond,
      achievedSendRate: (measured - 1) / ((lastSentAt - firstMeasuredSentAt) / 1000),
      acceptedRate: publish.length / ((lastAcceptedAt - windowStart) / 1000),
      achievedDeliveryRate: endToEnd.length / ((lastReceivedAt - windowStart) / 1000),
      endToEnd: summarize(endToEnd),
      publish: summarize(publish),
      afterAccept: summarize(
        [...acceptedAt].flatMap(([seq, at]) => (receivedAt.has(seq) ? [receivedAt.get(seq)! - at] : [])),
      ),
      missing: measured - endToEnd.length,
      rejected,
      invalidSignatures: receiver.invalid,
      cpu,
    };
    console.log(
      `  ${ratePerSecond} events/s for ${durationMs / 1000} s: publish->receive p50 ${result.endToEnd.p50.toFixed(1)} ms, ` +
        `p99 ${result.endToEnd.p99.toFixed(1)} ms, max ${result.endToEnd.max.toFixed(1)} ms (202 p50 ${result.publish.p50.toFixed(1)} ms, ` +
        `p99 ${result.publish.p99.toFixed(1)} ms); sent ${result.achievedSendRate.toFixed(0)}/s, accepted ${result.acceptedRate.toFixed(0)}/s, ` +
        `delivered ${result.achievedDeliveryRate.toFixed(0)}/s; missing ${result.missing}, rejected ${rejected}, invalid signatures ${receiver.invalid}`,
    );
    return result;
  } finally {
    receiver.onVerified = undefined;
    await client.close();
    await Promise.all(workers.map((worker) => worker.stop()));
    await api.stop();
    reportServiceOutput([api, ...workers]);
  }
}
