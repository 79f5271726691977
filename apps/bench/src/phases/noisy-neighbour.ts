import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { TestReceiver } from "@webhooks/testing";
import { ApiClient } from "../api-client.ts";
import { onCleanup } from "../cleanup.ts";
import { type CpuUsage, postgresTarget, startCpuWindow } from "../cpu-usage.ts";
import { freshDatabase } from "../databases.ts";
import { sleep, startApi } from "../services.ts";
import { DATABASES, RUN_PREFIX, settings } from "../settings.ts";
import { type Summary, summarize } from "../stats.ts";
import { startWatchedWorker, type WatchedWorker } from "../worker-process.ts";
import { reportServiceOutput } from "./throughput.ts";

/** Type A goes to the healthy subscription only, type B to the 10 bad ones only. */
export const HEALTHY_TYPE = "noisy.healthy";
export const NOISE_TYPE = "noisy.noise";
export const HANDOFF_TYPE = "noisy.handoff";
/** The p99 of a part's 1,000 webhooks is the 10th slowest: these are the ones it is made of. */
const SLOWEST_SHOWN = 10;

/**
 * How soon a waiting delivery starts once it may: a subscription with max_in_flight 1 gets a
 * burst, so each delivery but the first waits in its line for the one slot; the gap between the
 * receiver answering one request and the next request arriving is all the waiting adds (record,
 * release, wake, claim, gate, recording the start, send).
 */
export interface HandoffResult {
  deliveries: number;
  /** Response of one attempt to the arrival of the next, in ms. */
  gap: Summary;
  /** The most requests the receiver had at once (max_in_flight is 1). */
  peakOpen: number;
}

export interface HealthyRun {
  /** Healthy events published in the measured window, and how many the API did not accept. */
  sent: number;
  rejected: number;
  /** Of those, verified by the receiver before the drain window ended. */
  delivered: number;
  /**
   * Scheduled send time to verified receipt, over every event sent: one never delivered counts as
   * Infinity, so a percentile it reaches reads "not delivered" instead of flattering the rest.
   */
  latency: Summary;
  /** The slowest of the webhooks that did arrive. */
  slowestDelivered: number;
  /**
   * When the SLOWEST_SHOWN slowest (those at and above the p99 of 1,000) were sent, in seconds
   * into the part, in order of sending: whether one burst made the p99, or it is spread out.
   */
  slowestSentAt: number[];
  cpu: CpuUsage;
}

export interface NoisyNeighbourResult {
  alone: HealthyRun;
  beside: HealthyRun;
  /** Type B events published in part 2 (each is one delivery per bad subscription), and rejected. */
  noiseSent: number;
  noiseRejected: number;
  /** Per hanging receiver: the most requests it held open at once, and all the requests it got. */
  hangingPeakOpen: number[];
  /** The most requests the 5 hanging receivers held open at once between them. */
  hangingPeakOpenTogether: number;
  hangingRequests: number[];
  /** Per erroring receiver: the requests it got (each answered 500). */
  erroringRequests: number[];
  invalidSignatures: number;
  handoff: HandoffResult;
  /**
   * Deliveries that waited at the gate during part 2, by reason (the worker's
   * webhook_delivery_waits_total). `in_line` joined a line, mostly at the pre-check, before any
   * claim; the others were claimed, then taken back: `circuit_open` and `retry_after` ones found
   * their subscription held.
   */
  besideWaits: Record<string, number>;
}

/** The reasons webhook_delivery_waits_total counts, in the order the report lists them. */
export const WAIT_REASONS = [
  "in_line",
  "max_in_flight",
  "origin_max_in_flight",
  "rate_limit",
  "retry_after",
  "circuit_open",
  "disabled",
] as const;

/**
 * A loopback endpoint that misbehaves: "hang" accepts the connection and reads the request but
 * never answers, "error" answers 500 at once. Each listens on its own port, so each is its own
 * origin. Counts requests, and the most held open at once.
 */
class BadReceiver {
  url = "";
  requests = 0;
  open = 0;
  peakOpen = 0;
  close: () => Promise<void> = async () => {};
  readonly #server = createServer((req, res) => this.#handle(req, res));

  /** `together` counts the requests open across a group of receivers. */
  constructor(
    readonly mode: "hang" | "error",
    readonly together = { open: 0, peakOpen: 0 },
  ) {}

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
    // Destroys the sockets held open, so that nothing keeps the process alive.
    this.close = onCleanup(`close the ${this.mode} receiver`, () => {
      this.#server.closeAllConnections();
      return new Promise((resolve) => this.#server.close(() => resolve()));
    });
    return this;
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    this.requests++;
    req.resume();
    if (this.mode === "error") {
      res.writeHead(500, { "content-type": "text/plain" }).end("internal error");
      return;
    }
    this.open++;
    this.together.open++;
    this.peakOpen = Math.max(this.peakOpen, this.open);
    this.together.peakOpen = Math.max(this.together.peakOpen, this.together.open);
    // Closed by the sender giving up (its timeout), or by us at the end.
    res.once("close", () => {
      this.open--;
      this.together.open--;
    });
  }
}

/**
 * Sends `count` events of `type` open loop: event i is due at t0 + i / rate and is sent then,
 * whatever happened to the earlier ones (as in phase 2). `data(seq, due)` makes its data. Resolves
 * once every publish has been answered, with how many were not accepted.
 */
async function publishOpenLoop(
  client: ApiClient,
  type: string,
  ratePerSecond: number,
  count: number,
  t0: number,
  data: (seq: number, due: number) => Record<string, unknown>,
): Promise<{ rejected: number }> {
  const answers: Promise<number>[] = [];
  for (let seq = 0; seq < count; seq++) {
    const due = t0 + (seq * 1000) / ratePerSecond;
    const wait = due - performance.now();
    // A timer, never a busy wait (see latency.ts); a late send counts against the service.
    if (wait > 0) await sleep(wait);
    answers.push(client.publish(type, data(seq, due)).catch(() => 0));
  }
  const statuses = await Promise.all(answers);
  return { rejected: statuses.filter((status) => status !== 202).length };
}

/**
 * Phase 5: does one subscription's broken endpoint slow another's deliveries? At the service's
 * default settings (no WORKER_CONCURRENCY, DELIVERY_TIMEOUT or isolation setting passed), one API
 * and one worker process on a fresh database. One healthy subscription (type A, the verifying
 * receiver) and 10 bad ones (type B): 5 point at endpoints that never answer, 5 at endpoints that
 * answer 500. Part 1 measures the healthy subscription's publish -> receive latency alone; part 2
 * the same beside a steady stream of B. Latency is measured as in phase 2, from the scheduled send
 * time, open loop.
 */
/** Answers every request after `serviceMs`, and notes when each arrived and was answered. */
async function startSteadyReceiver(serviceMs: number) {
  const requests: { arrivedAt: number; answeredAt: number }[] = [];
  let open = 0;
  let peakOpen = 0;
  const server = createServer((req, res) => {
    const arrivedAt = performance.now();
    open += 1;
    peakOpen = Math.max(peakOpen, open);
    req.resume();
    req.on("end", () =>
      setTimeout(() => {
        open -= 1;
        requests.push({ arrivedAt, answeredAt: performance.now() });
        res.writeHead(200).end("ok");
      }, serviceMs),
    );
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const close = onCleanup(
    "close the hand-off receiver",
    () => new Promise<void>((resolve) => server.close(() => resolve())),
  );
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    peakOpen: () => peakOpen,
    close,
  };
}

async function measureHandoff(client: ApiClient): Promise<HandoffResult> {
  const s = settings.noisyNeighbour.handoff;
  const steady = await startSteadyReceiver(s.serviceMs);
  try {
    const created = await client.request<{ id: string }>("POST", "/v1/subscriptions", {
      url: `${steady.url}/handoff`,
      events: [HANDOFF_TYPE],
      max_in_flight: 1,
    });
    if (created.status !== 201) throw new Error(`POST /v1/subscriptions answered ${created.status}`);
    await Promise.all(Array.from({ length: s.deliveries }, (_, seq) => client.publish(HANDOFF_TYPE, { seq })));
    const deadline = performance.now() + s.timeoutMs;
    while (steady.requests.length < s.deliveries && performance.now() < deadline) await sleep(10);
    const sorted = [...steady.requests].sort((a, b) => a.arrivedAt - b.arrivedAt);
    const gaps = sorted.slice(1).map((request, i) => request.arrivedAt - sorted[i]!.answeredAt);
    const result = { deliveries: steady.requests.length, gap: summarize(gaps), peakOpen: steady.peakOpen() };
    console.log(
      `  hand-off, max_in_flight 1, ${s.deliveries} deliveries: next request ${fmt(result.gap.p50)} (p50), ${fmt(result.gap.p99)} (p99) ` +
        `after the previous answer; ${result.deliveries} delivered, at most ${result.peakOpen} at once`,
    );
    return result;
  } finally {
    await steady.close();
  }
}

export async function measureNoisyNeighbour(receiver: TestReceiver): Promise<NoisyNeighbourResult> {
  const s = settings.noisyNeighbour;
  const hangingTogether = { open: 0, peakOpen: 0 };
  const hanging = await Promise.all(
    Array.from({ length: s.hangingReceivers }, () => new BadReceiver("hang", hangingTogether).start()),
  );
  const erroring = await Promise.all(
    Array.from({ length: s.erroringReceivers }, () => new BadReceiver("error").start()),
  );
  const databaseUrl = await freshDatabase(DATABASES.main);
  const prefix = `${RUN_PREFIX}-noisy`;
  const api = await startApi(databaseUrl, prefix);
  const worker = await startWatchedWorker("worker-1", databaseUrl, prefix, {});
  const client = new ApiClient(api.baseUrl, s.connections);
  try {
    const path = "/noisy/healthy";
    const healthy = await client.createSubscription(`${receiver.url}${path}`, [HEALTHY_TYPE]);
    receiver.useSecret(path, healthy.secret);
    for (const bad of [...hanging, ...erroring]) await client.createSubscription(`${bad.url}/webhook`, [NOISE_TYPE]);
    receiver.resetCounts();

    // Receipt time of each healthy event, by part and sequence number.
    const receivedAt = new Map<string, number>();
    receiver.onVerified = (webhook) => {
      const { data } = JSON.parse(webhook.body) as { data: { part: string; seq: number; scheduled_at: number } };
      receivedAt.set(`${data.part} ${data.seq}`, webhook.arrivedAt - data.scheduled_at);
    };
    const cpuTargets = [
      { label: "api", processGroup: api.processGroup },
      { label: worker.name, processGroup: worker.processGroup },
      postgresTarget(Object.values(DATABASES)),
      { label: "redis", command: "redis-server" },
      { label: "bench (publisher+receivers)", pid: process.pid },
    ];

    /** Publishes the healthy part (and, beside it, `noise`), then waits up to drainMs for its webhooks. */
    const healthyRun = async (part: string, durationMs: number, noise?: () => Promise<void>): Promise<HealthyRun> => {
      const count = Math.round((durationMs / 1000) * s.healthyRatePerSecond);
      const endCpuWindow = startCpuWindow(cpuTargets);
      const t0 = performance.now() + 20;
      const [{ rejected }] = await Promise.all([
        publishOpenLoop(client, HEALTHY_TYPE, s.healthyRatePerSecond, count, t0, (seq, due) => ({
          part,
          seq,
          scheduled_at: due,
        })),
        noise?.(),
      ]);
      const deadline = t0 + durationMs + s.drainMs;
      const arrived = () => [...receivedAt.keys()].filter((key) => key.startsWith(`${part} `)).length;
      while (arrived() < count - rejected && performance.now() < deadline) await sleep(10);
      const cpu = endCpuWindow();
      const latencies = Array.from(
        { length: count },
        (_, seq) => receivedAt.get(`${part} ${seq}`) ?? Number.POSITIVE_INFINITY,
      );
      const delivered = latencies.filter(Number.isFinite);
      return {
        sent: count,
        rejected,
        delivered: delivered.length,
        latency: summarize(latencies),
        slowestDelivered: delivered.length ? Math.max(...delivered) : Number.NaN,
        slowestSentAt: latencies
          .map((latency, seq) => ({ latency, seq }))
          .sort((a, b) => b.latency - a.latency)
          .slice(0, SLOWEST_SHOWN)
          .map(({ seq }) => seq / s.healthyRatePerSecond)
          .sort((a, b) => a - b),
        cpu,
      };
    };

    await healthyRun("warmup", s.warmupMs);
    const alone = await healthyRun("alone", s.aloneMs);
    const handoff = await measureHandoff(client);
    let noiseSent = 0;
    let noiseRejected = 0;
    const waitsBefore = await gateWaits(worker);
    const beside = await healthyRun("beside", s.besideMs, async () => {
      noiseSent = Math.round((s.besideMs / 1000) * s.noiseRatePerSecond);
      ({ rejected: noiseRejected } = await publishOpenLoop(
        client,
        NOISE_TYPE,
        s.noiseRatePerSecond,
        noiseSent,
        performance.now() + 20,
        (seq) => ({ seq }),
      ));
    });
    receiver.onVerified = undefined;
    const waitsAfter = await gateWaits(worker);
    const besideWaits = Object.fromEntries(
      WAIT_REASONS.map((reason) => [reason, (waitsAfter[reason] ?? 0) - (waitsBefore[reason] ?? 0)]),
    );

    const result: NoisyNeighbourResult = {
      alone,
      beside,
      noiseSent,
      noiseRejected,
      hangingPeakOpen: hanging.map((r) => r.peakOpen),
      hangingPeakOpenTogether: hangingTogether.peakOpen,
      hangingRequests: hanging.map((r) => r.requests),
      erroringRequests: erroring.map((r) => r.requests),
      invalidSignatures: receiver.invalid,
      handoff,
      besideWaits,
    };
    const show = (run: HealthyRun) =>
      `p50 ${fmt(run.latency.p50)}, p99 ${fmt(run.latency.p99)}, max ${fmt(run.latency.max)}; delivered ${run.delivered} of ${run.sent}` +
      (run.rejected ? ` (${run.rejected} rejected)` : "") +
      `; the ${SLOWEST_SHOWN} slowest sent at ${run.slowestSentAt.map((at) => at.toFixed(2)).join(", ")} s into the part`;
    console.log(`  healthy alone, ${s.healthyRatePerSecond} events/s for ${s.aloneMs / 1000} s: ${show(alone)}`);
    console.log(
      `  healthy beside ${s.noiseRatePerSecond} noise events/s x 10 bad subscriptions for ${s.besideMs / 1000} s: ${show(beside)}`,
    );
    console.log(
      `  hanging receivers: at most ${Math.max(...result.hangingPeakOpen)} requests open at once (${result.hangingPeakOpen.join(", ")}; ` +
        `${result.hangingPeakOpenTogether} together), ` +
        `${sum(result.hangingRequests)} requests; erroring receivers: ${sum(result.erroringRequests)} requests (${result.erroringRequests.join(", ")}); ` +
        `invalid signatures ${result.invalidSignatures}`,
    );
    console.log(`  waits at the gate in part 2: ${describeWaits(besideWaits)}`);
    return result;
  } finally {
    receiver.onVerified = undefined;
    await client.close();
    // The bad endpoints first: destroying the hanging sockets ends the worker's stuck attempts, so it stops promptly.
    await Promise.all([...hanging, ...erroring].map((r) => r.close()));
    await worker.stop();
    await api.stop();
    reportServiceOutput([api, worker]);
  }
}

/** "in_line 2,062, circuit_open 5, ...": the reasons with any wait. */
export function describeWaits(waits: Record<string, number>): string {
  const counted = WAIT_REASONS.filter((reason) => (waits[reason] ?? 0) > 0).map(
    (reason) => `${reason} ${(waits[reason] ?? 0).toLocaleString("en-US")}`,
  );
  return counted.length ? counted.join(", ") : "none";
}

async function gateWaits(worker: WatchedWorker): Promise<Record<string, number>> {
  const counts = await Promise.all(
    WAIT_REASONS.map((reason) => worker.counter("webhook_delivery_waits_total", { name: "reason", value: reason })),
  );
  return Object.fromEntries(WAIT_REASONS.map((reason, i) => [reason, counts[i]!]));
}

const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);

/** A latency figure, or "not delivered" for a percentile that fell on a missing webhook. */
export function fmt(value: number): string {
  if (value === Number.POSITIVE_INFINITY) return "not delivered";
  return Number.isFinite(value) ? `${value.toFixed(value < 10 ? 2 : 1)} ms` : "n/a";
}
