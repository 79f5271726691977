import type { SqlClient } from "./sql.ts";
import { getSubscription } from "./subscriptions.ts";
import type { ScopedContext } from "./tenant-scope.ts";

/** The longest window the stats cover (docs/api.md#subscription-stats). */
export const MAX_STATS_RANGE_MS = 31 * 86_400_000;
/** The window when none is given: the last 24 hours. */
export const DEFAULT_STATS_RANGE_MS = 86_400_000;
/** Up to this long a window, the series is by hour; beyond it, by day. */
export const HOURLY_SERIES_MAX_MS = 48 * 3_600_000;

export interface SubscriptionStats {
  subscriptionId: string;
  since: Date;
  until: Date;
  /** Deliveries created in the window, by their status now. */
  deliveries: { queued: number; delivered: number; failed: number };
  /** Attempts that ended, started in the window, by what they got. */
  attempts: {
    total: number;
    "2xx": number;
    "3xx": number;
    "4xx": number;
    "5xx": number;
    timeout: number;
    networkError: number;
  };
  /** Of the attempts that got a response; null when none did. */
  latencyMs: { p50: number | null; p95: number | null; p99: number | null };
  /** Every UTC hour (or day) the window touches, oldest first, zeros included. */
  series: { start: Date; delivered: number; failed: number }[];
}

type Bucket = "hour" | "day";

/**
 * Deliveries created in the window, by UTC hour or day and status. Read from the index
 * (subscription_id, status, created_at, id) alone: the status list puts the three statuses into
 * the index condition, so each is one range of it rather than a walk of the subscription's
 * whole log.
 */
export const DELIVERY_COUNTS_SQL = `
  SELECT date_trunc($4, created_at, 'UTC') AS bucket, status::text AS status, count(*)::int AS count
  FROM deliveries
  WHERE subscription_id = $1 AND status = ANY('{queued,delivered,failed}'::delivery_status[])
    AND created_at >= $2 AND created_at < $3
  GROUP BY 1, 2`;

/**
 * Attempts started in the window, read from delivery_attempts_subscription_stats_idx alone. One
 * whose outcome is unknown (no duration: its worker stopped mid-request) counts in the total
 * only, as does a status outside 200-599.
 */
export const ATTEMPT_COUNTS_SQL = `
  SELECT count(*)::int AS total,
         count(*) FILTER (WHERE response_code >= 200 AND response_code < 300)::int AS "2xx",
         count(*) FILTER (WHERE response_code >= 300 AND response_code < 400)::int AS "3xx",
         count(*) FILTER (WHERE response_code >= 400 AND response_code < 500)::int AS "4xx",
         count(*) FILTER (WHERE response_code >= 500 AND response_code < 600)::int AS "5xx",
         count(*) FILTER (WHERE response_code IS NULL AND timed_out)::int AS timeout,
         count(*) FILTER (WHERE response_code IS NULL AND NOT timed_out AND duration_ms IS NOT NULL)::int AS "networkError",
         percentile_disc(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY duration_ms)
           FILTER (WHERE response_code IS NOT NULL AND duration_ms IS NOT NULL) AS latency
  FROM delivery_attempts
  WHERE subscription_id = $1 AND started_at >= $2 AND started_at < $3`;

/**
 * A subscription's deliveries and attempts over [since, until) (docs/api.md#subscription-stats).
 * The caller has checked the window (later than since, at most MAX_STATS_RANGE_MS). A
 * subscription out of the caller's scope, or deleted, is not found, as for every read by id.
 */
export async function getSubscriptionStats(
  ctx: ScopedContext & { sql: SqlClient },
  input: { subscriptionId: string; since: Date; until: Date },
): Promise<SubscriptionStats> {
  const { since, until } = input;
  await getSubscription(ctx, input.subscriptionId);
  const bucket: Bucket = until.getTime() - since.getTime() <= HOURLY_SERIES_MAX_MS ? "hour" : "day";
  const window = [input.subscriptionId, since, until];
  const [deliveryRows, [attemptRow]] = await Promise.all([
    ctx.sql.query<{ bucket: Date; status: "queued" | "delivered" | "failed"; count: number }>(DELIVERY_COUNTS_SQL, [
      ...window,
      bucket,
    ]),
    ctx.sql.query<SubscriptionStats["attempts"] & { latency: number[] | null }>(ATTEMPT_COUNTS_SQL, window),
  ]);
  if (!attemptRow) throw new Error("the attempt counts returned no row");
  const { latency, ...attempts } = attemptRow;

  const deliveries = { queued: 0, delivered: 0, failed: 0 };
  const series = bucketStarts(since, until, bucket).map((start) => ({ start, delivered: 0, failed: 0 }));
  const byStart = new Map(series.map((point) => [point.start.getTime(), point]));
  for (const row of deliveryRows) {
    deliveries[row.status] += row.count;
    const point = byStart.get(row.bucket.getTime());
    if (point && row.status !== "queued") point[row.status] += row.count;
  }
  return {
    subscriptionId: input.subscriptionId,
    since,
    until,
    deliveries,
    attempts,
    latencyMs: { p50: latency?.[0] ?? null, p95: latency?.[1] ?? null, p99: latency?.[2] ?? null },
    series,
  };
}

/** The start of every UTC hour or day that [since, until) touches. */
function bucketStarts(since: Date, until: Date, bucket: Bucket): Date[] {
  const first = new Date(since);
  if (bucket === "day") first.setUTCHours(0, 0, 0, 0);
  else first.setUTCMinutes(0, 0, 0);
  const starts: Date[] = [];
  for (let at = first; at < until; at = new Date(at.getTime() + (bucket === "day" ? 86_400_000 : 3_600_000)))
    starts.push(at);
  return starts;
}
