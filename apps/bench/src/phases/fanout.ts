import { newId } from "@webhooks/core";
import { withClient } from "@webhooks/testing";
import { pipelineSubscription, pipelineWorkerEnv, type Stack, startStack } from "../harness/stack.ts";
import { percentile, round } from "../harness/stats.ts";
import { waitUntil, within } from "../harness/time.ts";
import { atScale, check, definePhase, table } from "../phase.ts";

const SETTINGS = { full: { subscriptions: 10_000, runs: 5 }, quick: { subscriptions: 1_000, runs: 2 } };
const TARGET_ACCEPT_MS = 250;

/**
 * Subscribes one URL per entry of `urls` to `type`: the first through the API (for its secret),
 * the rest as copies of it written in one statement, since thousands of POSTs would only measure
 * subscription creation. Every column but the id and the URL is copied, whatever the schema holds.
 */
export async function subscribeMany(stack: Stack, type: string, urls: string[], settings = {}): Promise<string> {
  const first = await stack.client.createSubscription(urls[0]!, [type], settings);
  await withClient(stack.database.url, async (db) => {
    const { rows } = await db.query<{ columns: string }>(
      `SELECT string_agg(quote_ident(column_name), ', ') AS columns FROM information_schema.columns
       WHERE table_schema = current_schema() AND table_name = 'subscriptions' AND column_name NOT IN ('id', 'url')`,
    );
    const columns = rows[0]!.columns;
    await db.query(
      `INSERT INTO subscriptions (id, url, ${columns}) SELECT copy.id, copy.url, ${columns}
       FROM subscriptions, unnest($2::text[], $3::text[]) AS copy(id, url) WHERE subscriptions.id = $1`,
      [first.id, urls.slice(1).map(() => newId("subscription")), urls.slice(1)],
    );
  });
  return first.secret;
}

/** A filter each subscription matches every event of the phase with, evaluated in the publish's SQL. */
const FILTER = { data: { run: { $gte: 1 } }, $not: { data: { test: true } } };

/**
 * One event matched by many subscriptions, each at a path of its own at the verifying receiver (so
 * that duplicates show). Each run waits for all its deliveries to be recorded, so every POST is
 * timed on an idle service; the runs go again with a payload filter on every subscription.
 */
export const fanOutPhase = definePhase({
  name: "fanout",
  title: "Fan-out: one event to many subscriptions",
  summary: "POST /v1/events of one event matched by 10,000 subscriptions: time to the 202, and until all delivered",
  async run(context) {
    const { subscriptions, runs } = atScale(context.scale, SETTINGS);
    const { receiver, best } = context;
    const setup = { workers: best.W10.workers, workerEnv: pipelineWorkerEnv(best.W10) };
    const stack = await startStack(context, "fanout", setup);
    try {
      const paths = Array.from({ length: subscriptions }, (_, i) => `/fanout/${i}`);
      const urls = paths.map((path) => `${receiver.url}${path}`);
      const secret = await subscribeMany(stack, "fanout.created", urls, pipelineSubscription(best.W10));
      for (const path of paths) receiver.useSecret(path, secret);
      // Per run: whether every subscription had FILTER, from the POST to its 202 and to the last delivery.
      const result = { subscriptions, filtered: [] as boolean[], acceptMs: [] as number[], allOnce: true };
      const deliveredMs: (number | undefined)[] = [];
      // A subscription of another type, for the filter compiled as the API stores it; then copied to all.
      const { id } = await stack.client.createSubscription(`${receiver.url}/x`, ["fanout.x"], { filter: FILTER });
      const filterAll = `UPDATE subscriptions s SET filter = f.filter, filter_path = f.filter_path FROM subscriptions f
                         WHERE f.id = $1 AND s.id <> f.id`;
      for (let run = 1; run <= 2 * runs; run++) {
        const filtered = run > runs;
        // Vacuumed after, as autovacuum would: the update leaves a dead version of every row.
        if (run === runs + 1)
          await withClient(stack.database.url, async (db) => {
            await db.query(filterAll, [id]);
            await db.query("VACUUM ANALYZE subscriptions");
          });
        result.filtered.push(filtered);
        receiver.resetCounts();
        const [delivered, started] = [receiver.whenVerified(subscriptions), performance.now()];
        await stack.client.publish("fanout.created", { run }, 202);
        result.acceptMs.push(performance.now() - started);
        const finishedAt = await within(delivered, 120_000);
        deliveredMs.push(finishedAt === undefined ? undefined : finishedAt - started);
        const sql = "SELECT count(*)::int AS n FROM deliveries WHERE status = 'delivered' AND attempts = 1";
        const recordedOnce = await withClient(stack.database.url, (db) =>
          waitUntil(async () => (await db.query<{ n: number }>(sql)).rows[0]!.n === run * subscriptions, 30_000),
        );
        if (!recordedOnce || finishedAt === undefined || receiver.duplicates + receiver.invalid > 0)
          result.allOnce = false;
        const label = `  run ${run}${filtered ? ", filtered" : ""}`;
        console.log(`${label}: 202 after ${round(result.acceptMs.at(-1)!)} ms, ${receiver.verified} delivered`);
      }
      return { ...result, deliveredMs };
    } finally {
      await stack.stop();
    }
  },
  report({ subscriptions, filtered, acceptMs, deliveredMs, allOnce }) {
    const runs = acceptMs.map((accept, i) => ({
      run: String(i + 1),
      filter: filtered[i] ? "on every subscription" : "none",
      "202 after": `${round(accept)} ms`,
      "all delivered after": deliveredMs[i] === undefined ? "**not all**" : `${round(deliveredMs[i]!)} ms`,
    }));
    const checks = [false, true].map((withFilter) => {
      const accepts = acceptMs.filter((_, i) => filtered[i] === withFilter);
      const median = percentile(accepts, 50);
      const what = withFilter ? ", each with a payload filter" : "";
      return check(
        `One event to ${round(subscriptions)} subscriptions${what}: POST /v1/events until 202 (median of ${accepts.length})`,
        `${round(median)} ms; every delivery made once: ${allOnce ? "yes" : "no"}`,
        `<= ${TARGET_ACCEPT_MS} ms, every delivery made once`,
        median <= TARGET_ACCEPT_MS && allOnce,
      );
    });
    return { tables: [table(`One event to ${round(subscriptions)} subscriptions`, runs)], checks };
  },
});
