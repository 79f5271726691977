import { ATTEMPT_COUNTS_SQL, DELIVERY_COUNTS_SQL } from "@webhooks/db";
import type pg from "pg";
import { type LogCase, logPhase } from "./list.ts";

/**
 * GET /v1/subscriptions/{id}/stats of the busiest subscription (10% of the log) over its last 24
 * hours (the target), 7 days and 31 days, and of an ordinary one (0.9%) over 24 hours; each with
 * the plans of its two statements, the deliveries' and the attempts'.
 */
async function statsCases(db: pg.Client): Promise<LogCase[]> {
  const { rows } = await db.query<{ busy: string; usual: string; until: Date }>(
    `SELECT max(id) AS busy, min(id) AS usual, (SELECT max(created_at) + interval '1 second' FROM deliveries) AS until
     FROM subscriptions`,
  );
  const { busy, usual, until } = rows[0]!;
  const statsCase = (name: string, subscription: string, days: number): LogCase => {
    const since = new Date(until.getTime() - days * 86_400_000).toISOString();
    const window = [subscription, since, until.toISOString()];
    const deliveries = { text: DELIVERY_COUNTS_SQL, values: [...window, days > 2 ? "day" : "hour"] };
    const path = `/v1/subscriptions/${subscription}/stats?since=${since}&until=${until.toISOString()}`;
    return { name, path, sql: [deliveries, { text: ATTEMPT_COUNTS_SQL, values: window }] };
  };
  return [
    statsCase("busiest subscription, 24 h", busy, 1),
    statsCase("busiest subscription, 7 days", busy, 7),
    statsCase("busiest subscription, 31 days", busy, 31),
    statsCase("another subscription, 24 h", usual, 1),
    { name: "reference: GET /healthz", path: "/healthz", sql: [] },
  ];
}

export const statsPhase = logPhase({
  name: "stats",
  title: "GET /v1/subscriptions/{id}/stats on a large log",
  summary: "stats latency over 24 h, 7 and 31 days of the busiest subscription of 10,000,000 seeded deliveries",
  settings: { full: { deliveries: 10_000_000, rounds: 300 }, quick: { deliveries: 200_000, rounds: 30 } },
  seed: { queued: 1, retrying: 0, busy: true },
  cases: statsCases,
  rows: (body) => (body as { attempts?: { total: number } }).attempts?.total ?? 0, // the attempts counted
  target: { ms: 50, figure: (n) => `Stats p99, 24 h of the busiest subscription, log of ${n}`, worstCase: false },
});
