import type { ApiClient } from "./api-client.ts";
import type { Stack } from "./stack.ts";
import { summarize } from "./stats.ts";
import { sleep, waitUntil } from "./time.ts";

/**
 * Publishes `count` events open loop: event i is sent at its due time, `start + i * 1000 / rate`,
 * whatever happened to the earlier ones, so a slow answer cannot hide its delay (coordinated
 * omission). Resolves with each event's time from its due time to its 202 (undefined if not
 * accepted) and the last due time.
 */
export async function publishOpenLoop(
  client: ApiClient,
  input: { type: string; ratePerSecond: number; count: number },
  data: (seq: number, due: number) => Record<string, unknown>,
): Promise<{ accepted: (number | undefined)[]; lastDue: number }> {
  const start = performance.now() + 20;
  const answers: Promise<number | undefined>[] = [];
  for (let seq = 0; seq < input.count; seq++) {
    const due = start + (seq * 1000) / input.ratePerSecond;
    // A timer, never a busy wait: spinning would take a core from the service under test.
    if (due > performance.now()) await sleep(due - performance.now());
    const answer = client.publish(input.type, data(seq, due));
    answers.push(answer.then((status) => (status === 202 ? performance.now() - due : undefined)));
  }
  return { accepted: await Promise.all(answers), lastDue: start + ((input.count - 1) * 1000) / input.ratePerSecond };
}

export type LatencyRun = Awaited<ReturnType<typeof measureLatency>>;

let runs = 0;

/**
 * Publishes `durationMs` of events open loop (with `beside` alongside), then waits up to `drainMs`
 * for their webhooks at the stack's receiver, which shares this process's clock. Latencies from the
 * due time (in the event) to verified receipt (Infinity if never), to the 202, and from the 202 to
 * receipt; CPU over the sending and the wait.
 */
export async function measureLatency(
  stack: Stack,
  input: { type: string; ratePerSecond: number; durationMs: number; drainMs: number },
  beside?: () => Promise<unknown>,
) {
  const run = ++runs;
  const arrived = new Map<number, number>();
  stack.receiver.onVerified = (webhook) => {
    const { data } = JSON.parse(webhook.body) as { data: { run: number; seq: number; due: number } };
    if (data.run === run) arrived.set(data.seq, webhook.arrivedAt - data.due);
  };
  try {
    const count = Math.round((input.durationMs / 1000) * input.ratePerSecond);
    const endCpu = stack.cpuWindow();
    const [{ accepted, lastDue }] = await Promise.all([
      publishOpenLoop(stack.client, { ...input, count }, (seq, due) => ({ run, seq, due })),
      beside?.(),
    ]);
    const acceptedCount = accepted.filter((lateness) => lateness !== undefined).length;
    await waitUntil(() => arrived.size >= acceptedCount, lastDue + input.drainMs - performance.now());
    const endToEnd = accepted.map((_, seq) => arrived.get(seq) ?? Number.POSITIVE_INFINITY);
    return {
      sent: count,
      rejected: count - acceptedCount,
      delivered: arrived.size,
      endToEnd: summarize(endToEnd),
      accepted: summarize(accepted.filter((lateness) => lateness !== undefined)),
      afterAccepted: summarize(
        accepted.flatMap((lateness, seq) =>
          lateness === undefined || !arrived.has(seq) ? [] : [endToEnd[seq]! - lateness],
        ),
      ),
      cpu: endCpu(),
    };
  } finally {
    stack.receiver.onVerified = undefined;
  }
}
