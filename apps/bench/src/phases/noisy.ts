import { describeCores } from "../harness/cpu.ts";
import { type LatencyRun, measureLatency, publishOpenLoop } from "../harness/open-loop.ts";
import { type CountingReceiver, startCountingReceiver } from "../harness/receivers.ts";
import { startStack } from "../harness/stack.ts";
import { deliveredOf, latencies, ms, round } from "../harness/stats.ts";
import { atScale, check, definePhase, table } from "../phase.ts";

const SETTINGS = { full: { warmupMs: 2_000, partMs: 20_000 }, quick: { warmupMs: 1_000, partMs: 5_000 } };
/** Events per second to the healthy subscription, and to the failing ones (each event goes to all 10 of them). */
const RATES = { healthy: 50, noise: 10 };
const BAD_ENDPOINTS = 5;
const TARGET_P99_FACTOR = 2;

/**
 * Does one subscription's broken endpoint slow another's deliveries? At the service's default
 * settings, one API and one worker: a healthy subscription (the verifying receiver) and 10 bad
 * ones, 5 at endpoints that never answer and 5 at endpoints that answer 500. The healthy one's
 * publish -> receive latency alone, then beside a steady stream to the bad ones.
 */
export const noisyPhase = definePhase({
  name: "noisy",
  title: "Noisy neighbour: one healthy endpoint beside failing ones",
  summary: "a healthy subscription's latency alone and beside 10 failing endpoints, at default settings",
  async run(context) {
    const s = atScale(context.scale, SETTINGS);
    const bad: CountingReceiver[] = [];
    for (let i = 0; i < 2 * BAD_ENDPOINTS; i++) {
      bad.push(await startCountingReceiver({ status: i < BAD_ENDPOINTS ? "hang" : 500 }));
    }
    const stack = await startStack(context, "noisy", { connections: 64 });
    try {
      await stack.subscribe("/noisy", ["noisy.healthy"]);
      for (const endpoint of bad) await stack.client.createSubscription(`${endpoint.url}/webhook`, ["noisy.noise"]);
      const healthy = (durationMs: number, beside?: () => Promise<unknown>) => {
        const input = { type: "noisy.healthy", ratePerSecond: RATES.healthy, durationMs, drainMs: 5_000 };
        return measureLatency(stack, input, beside);
      };
      await healthy(s.warmupMs);
      const alone = await healthy(s.partMs);
      const noise = { type: "noisy.noise", ratePerSecond: RATES.noise, count: (s.partMs / 1000) * RATES.noise };
      const beside = await healthy(s.partMs, () => publishOpenLoop(stack.client, noise, (seq) => ({ seq })));
      console.log(`  healthy p99 alone ${ms(alone.endToEnd.p99)}, beside failing endpoints ${ms(beside.endToEnd.p99)}`);
      const hanging = bad.slice(0, BAD_ENDPOINTS).map((r) => ({ requests: r.requests, peakOpen: r.peakOpenRequests }));
      return { alone, beside, hanging, erroring: bad.slice(BAD_ENDPOINTS).map((r) => r.requests) };
    } finally {
      // The bad endpoints first: dropping the held requests ends the worker's stuck attempts, so it stops promptly.
      await Promise.all(bad.map((r) => r.close()));
      await stack.stop();
    }
  },
  report({ alone, beside, hanging, erroring }) {
    const [factor, allCame] = [beside.endToEnd.p99 / alone.endToEnd.p99, beside.delivered === beside.sent];
    const failing = (requests: number[]) => `${requests.join(", ")} requests`;
    const row = (part: string, run: LatencyRun, endpoints = "-") => ({
      part,
      "p50 / p99 / max": latencies(run.endToEnd),
      delivered: deliveredOf(run),
      [`${BAD_ENDPOINTS} endpoints that never answer (most open at once); ${BAD_ENDPOINTS} that answer 500`]: endpoints,
      "CPU (cores)": describeCores(run.cpu),
    });
    const held = hanging.map((h) => h.peakOpen).join(", ");
    const endpoints = `${failing(hanging.map((h) => h.requests))} (${held}); ${failing(erroring)}`;
    return {
      tables: [
        table(`The healthy subscription at ${RATES.healthy} events/s, from the due time to verified receipt`, [
          row("alone", alone),
          row(`beside ${RATES.noise * 2 * BAD_ENDPOINTS} failing deliveries/s`, beside, endpoints),
        ]),
      ],
      checks: [
        {
          figure: "Healthy p99 beside 10 failing endpoints",
          measured: `${ms(beside.endToEnd.p99)} = ${factor.toFixed(1)}x alone's ${ms(alone.endToEnd.p99)}`,
          target: `<= ${TARGET_P99_FACTOR}x alone`,
          met: factor <= TARGET_P99_FACTOR,
        },
        check("... healthy webhooks delivered", `${round(beside.delivered)} of ${round(beside.sent)}`, "all", allCame),
      ],
    };
  },
});
