import type { HealthState } from "@webhooks/core";
import type { PrismaClientOrTransaction } from "./client.ts";

/** The subscriptions counted by health, for the API's /metrics. */

export type SubscriptionHealthLabel = HealthState | "disabled";

/**
 * How many subscriptions (not deleted) are in each health state, for the API's /metrics.
 * The CASE mirrors core's `healthState`, evaluated in PostgreSQL so that a scrape reads a handful
 * of counts, not every row; "disabled" (disabled by the service, disabled_reason set) comes first.
 * A subscription paused by its owner is counted by its health like an active one.
 */
export async function countSubscriptionsByHealth(
  ctx: { db: PrismaClientOrTransaction },
  now: Date,
): Promise<Record<SubscriptionHealthLabel, number>> {
  const rows = await ctx.db.$queryRaw<{ health: SubscriptionHealthLabel; count: number }[]>`
    SELECT health, count(*)::int AS count FROM (
      SELECT CASE
        WHEN disabled_reason IS NOT NULL THEN 'disabled'
        WHEN circuit_opened_at IS NOT NULL OR held_until > ${now} THEN 'circuit_open'
        WHEN failing_since IS NOT NULL THEN 'failing'
        ELSE 'healthy'
      END AS health
      FROM subscriptions WHERE deleted_at IS NULL
    ) AS states
    GROUP BY health`;
  const counts: Record<SubscriptionHealthLabel, number> = { healthy: 0, failing: 0, circuit_open: 0, disabled: 0 };
  for (const row of rows) counts[row.health] = row.count;
  return counts;
}

/**
 * The subscriptions counted as circuit_open by `countSubscriptionsByHealth`: circuit open, or
 * held by a Retry-After. Only these, so a per-subscription metric stays small.
 */
export async function listHeldSubscriptionIds(ctx: { db: PrismaClientOrTransaction }, now: Date): Promise<string[]> {
  const rows = await ctx.db.$queryRaw<{ id: string }[]>`
    SELECT id FROM subscriptions
    WHERE deleted_at IS NULL AND disabled_reason IS NULL AND (circuit_opened_at IS NOT NULL OR held_until > ${now})
    ORDER BY id`;
  return rows.map((row) => row.id);
}
