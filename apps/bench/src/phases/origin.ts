import { type CountingReceiverOptions, startCountingReceiver } from "../harness/receivers.ts";
import { startStack } from "../harness/stack.ts";
import { percentile, round, seconds } from "../harness/stats.ts";
import { waitUntil } from "../harness/time.ts";
import { atScale, type Context, definePhase, table } from "../phase.ts";
import { subscribeMany } from "./fanout.ts";

const SETTINGS = {
  full: { subscriptions: 10_000, deadlineMs: 120_000 },
  quick: { subscriptions: 1_000, deadlineMs: 30_000 },
};
/** The second part: a short line at a tight origin cap, to a receiver that takes its time. */
const CAPPED = { subscriptions: 300, originMaxInFlight: 5, serviceMs: 20 };
const CAPPED_IDEAL_S = (CAPPED.subscriptions * CAPPED.serviceMs) / CAPPED.originMaxInFlight / 1000;
const TARGETS = { sameOverDistinct: 1.5, cappedOverIdeal: 2 };

type OriginRun = Awaited<ReturnType<typeof oneEvent>>;

/**
 * One event to `count` subscriptions at a counting receiver (at the URLs `urlOf` gives), until all
 * came or the deadline: how many (and twice), when (median, last, per 10 s), the most open at once.
 */
async function oneEvent(
  context: Context,
  input: { count: number; deadlineMs: number; originMaxInFlight?: number; receiver: CountingReceiverOptions },
  urlOf: (i: number, port: number) => string,
) {
  const { workers, concurrency } = context.best.W10;
  const workerEnv: Record<string, string> = { WORKER_CONCURRENCY: String(concurrency) };
  if (input.originMaxInFlight) workerEnv.ORIGIN_MAX_IN_FLIGHT = String(input.originMaxInFlight);
  const receiver = await startCountingReceiver(input.receiver);
  const stack = await startStack(context, "origin", { workers, workerEnv });
  try {
    const urls = Array.from({ length: input.count }, (_, i) => urlOf(i, receiver.port));
    await subscribeMany(stack, "origin", urls);
    const started = performance.now();
    await stack.client.publish("origin", {}, 202);
    const all = await waitUntil(() => receiver.answered.length >= input.count, input.deadlineMs);
    const lastS = ((all ? receiver.answered.at(-1)!.answeredAt : performance.now()) - started) / 1000;
    const arrivals = receiver.answered.map((request) => (request.arrivedAt - started) / 1000);
    console.log(`  ${receiver.paths.size} of ${input.count} delivered in ${seconds(lastS)}`);
    const [peakRequests, peakConnections] = [receiver.peakOpenRequests, receiver.peakOpenConnections];
    const perTenSeconds = Array.from(
      { length: Math.ceil(lastS / 10) },
      (_, i) => arrivals.filter((at) => Math.floor(at / 10) === i).length,
    );
    const counts = { delivered: receiver.paths.size, duplicates: receiver.duplicates, peakRequests, peakConnections };
    return { subscriptions: input.count, ...counts, medianS: percentile(arrivals, 50), lastS, perTenSeconds };
  } finally {
    await stack.stop();
    await receiver.close();
  }
}

/**
 * Many subscriptions whose URLs share one origin (many customers on one platform's host): one
 * event to 10,000 of them at the default ORIGIN_MAX_IN_FLIGHT, against the same deliveries to as
 * many origins (127.1.x.y: one server on every loopback address); then 300 on one origin capped at
 * 5, to a receiver that answers in 20 ms. Each part gives up at its deadline and reports what came.
 */
export const originPhase = definePhase({
  name: "origin",
  title: "Many subscriptions on one origin",
  summary: "one event to 10,000 subscriptions on one origin vs on distinct origins; 300 at ORIGIN_MAX_IN_FLIGHT=5",
  async run(context) {
    const { subscriptions: count, deadlineMs } = atScale(context.scale, SETTINGS);
    const host = (i: number) => `127.1.${1 + Math.floor(i / 250)}.${1 + (i % 250)}`;
    const loopback = (i: number, port: number) => `http://127.0.0.1:${port}/s${i}`;
    const receiver = { everyLoopbackAddress: true };
    const distinct = await oneEvent(context, { count, deadlineMs, receiver }, (i, p) => `http://${host(i)}:${p}/s${i}`);
    const same = await oneEvent(context, { count, deadlineMs, receiver: {} }, loopback);
    const { subscriptions, originMaxInFlight, serviceMs } = CAPPED;
    const cappedInput = {
      count: subscriptions,
      deadlineMs: 30_000,
      originMaxInFlight,
      receiver: { delayMs: serviceMs },
    };
    const capped = await oneEvent(context, cappedInput, loopback);
    return { distinct, same, capped };
  },
  report({ distinct, same, capped }) {
    const complete = (r: OriginRun) => r.delivered === r.subscriptions && r.duplicates === 0;
    const gaveUp = (r: OriginRun) => (complete(r) ? "" : ` (gave up with ${round(r.delivered)} delivered)`);
    const row = (subscriptions: string, r: OriginRun) => ({
      subscriptions,
      delivered: `${round(r.delivered)} of ${round(r.subscriptions)}${r.duplicates ? ` (${r.duplicates} twice)` : ""}`,
      "median arrival": seconds(r.medianS),
      "all delivered": `${seconds(r.lastS)}${complete(r) ? "" : " (gave up)"}`,
      "arrivals per 10 s": r.perTenSeconds.map(round).join(", "),
      "most requests / connections open": `${r.peakRequests} / ${r.peakConnections}`,
    });
    const ratio = same.lastS / distinct.lastS;
    return {
      tables: [
        table("One event; times from its send; the receiver answers at once (in 20 ms for the capped line)", [
          row("on distinct origins, ORIGIN_MAX_IN_FLIGHT 50", distinct),
          row("on one origin, ORIGIN_MAX_IN_FLIGHT 50", same),
          row(`on one origin, ORIGIN_MAX_IN_FLIGHT ${CAPPED.originMaxInFlight}`, capped),
        ]),
      ],
      checks: [
        {
          figure: `One event to ${round(same.subscriptions)} subscriptions on one origin, all delivered, against distinct origins`,
          measured: `${seconds(same.lastS)}${gaveUp(same)} against ${seconds(distinct.lastS)} = ${ratio.toFixed(1)}x`,
          target: `<= ${TARGETS.sameOverDistinct}x, each delivered once`,
          met: ratio <= TARGETS.sameOverDistinct && complete(same) && complete(distinct),
        },
        {
          figure: `${CAPPED.subscriptions} subscriptions on one origin capped at ${CAPPED.originMaxInFlight}, receiver at ${CAPPED.serviceMs} ms: drained in`,
          measured: `${seconds(capped.lastS)}${gaveUp(capped)}`,
          target: `<= ${TARGETS.cappedOverIdeal}x the ideal ${CAPPED_IDEAL_S.toFixed(1)} s`,
          met: capped.lastS <= TARGETS.cappedOverIdeal * CAPPED_IDEAL_S && complete(capped),
        },
        {
          figure: "... most requests and connections open at once at the receiver",
          measured: `${capped.peakRequests} requests, ${capped.peakConnections} connections`,
          target: `<= ${CAPPED.originMaxInFlight}`,
          met: Math.max(capped.peakRequests, capped.peakConnections) <= CAPPED.originMaxInFlight,
        },
      ],
    };
  },
});
