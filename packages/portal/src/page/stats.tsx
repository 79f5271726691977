import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { type SubscriptionStats, unwrap } from "./api.ts";
import { ErrorAlert } from "./components.tsx";
import { useClient, useLoad } from "./hooks.ts";

/** The windows the page offers: the API's default (24 hours, by hour), a week and the longest, by day. */
const RANGES = [
  { key: "24h", label: "Last 24 hours", days: 1 },
  { key: "7d", label: "Last 7 days", days: 7 },
  { key: "31d", label: "Last 31 days", days: 31 },
] as const;
type RangeKey = (typeof RANGES)[number]["key"];

const count = new Intl.NumberFormat();
const hourLabel = new Intl.DateTimeFormat(undefined, { hour: "numeric", minute: "2-digit" });
// Days are UTC days, as the API counts them (docs/api.md#subscription-stats).
const dayLabel = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric", timeZone: "UTC" });

/** An endpoint's stats (docs/portal.md#stats): its deliveries over time as a chart, and the counts behind it. */
export function EndpointStats({ subscriptionId }: { subscriptionId: string }) {
  const client = useClient();
  const [range, setRange] = useState<RangeKey>("24h");
  const days = RANGES.find((r) => r.key === range)?.days ?? 1;
  const loaded = useLoad(() => {
    const until = new Date();
    const since = new Date(until.getTime() - days * 86_400_000);
    const query = { since: since.toISOString(), until: until.toISOString() };
    const path = { subscription_id: subscriptionId };
    return unwrap(client.GET("/v1/subscriptions/{subscription_id}/stats", { params: { path, query } }));
  }, `${subscriptionId} ${range}`);
  const stats = loaded.data;
  return (
    <section aria-labelledby="stats-title" class="panel">
      <h2 id="stats-title">Activity</h2>
      <fieldset class="segmented">
        <legend class="sr-only">Time range</legend>
        {RANGES.map((r) => (
          <button key={r.key} type="button" aria-pressed={r.key === range} onClick={() => setRange(r.key)}>
            {r.label}
          </button>
        ))}
      </fieldset>
      <ErrorAlert error={loaded.error} />
      {!stats && loaded.loading && <p>Loading…</p>}
      {stats && (
        // By the answer's own window: while another range loads, the last answer stays as it was.
        <StatsBody stats={stats} byDay={Date.parse(stats.until) - Date.parse(stats.since) > 48 * 3_600_000} />
      )}
    </section>
  );
}

function StatsBody({ stats, byDay }: { stats: SubscriptionStats; byDay: boolean }) {
  const { deliveries, attempts, latency_ms: latency } = stats;
  const ms = (value: number | null) => (value === null ? "–" : `${count.format(value)} ms`);
  return (
    <>
      <SeriesChart stats={stats} byDay={byDay} />
      <div class="stat-groups">
        <StatGroup title="Deliveries">
          <Stat label="Delivered" value={count.format(deliveries.delivered)} tone="good" />
          <Stat label="Failed" value={count.format(deliveries.failed)} tone="bad" />
          <Stat label="Queued" value={count.format(deliveries.queued)} />
        </StatGroup>
        <StatGroup title="Attempts">
          <Stat label="Total" value={count.format(attempts.total)} />
          <Stat label="2xx" value={count.format(attempts["2xx"])} />
          <Stat label="3xx" value={count.format(attempts["3xx"])} />
          <Stat label="4xx" value={count.format(attempts["4xx"])} />
          <Stat label="5xx" value={count.format(attempts["5xx"])} />
          <Stat label="Timeouts" value={count.format(attempts.timeout)} />
          <Stat label="Network errors" value={count.format(attempts.network_error)} />
        </StatGroup>
        <StatGroup title="Response time">
          <Stat label="Median" value={ms(latency.p50)} />
          <Stat label="95th percentile" value={ms(latency.p95)} />
          <Stat label="99th percentile" value={ms(latency.p99)} />
        </StatGroup>
      </div>
      <p class="help">
        Deliveries are counted by when they were created, with their status now; attempts by when they started. Response
        times are of the attempts that got an answer.
      </p>
    </>
  );
}

function StatGroup({ title, children }: { title: string; children: ComponentChildren }) {
  return (
    <div>
      <h3 class="stat-title">{title}</h3>
      <dl class="stat-group" data-group={title}>
        {children}
      </dl>
    </div>
  );
}

function Stat({ label, value, tone }: { label: string; value: string; tone?: "good" | "bad" }) {
  return (
    <div class={`stat${tone ? ` ${tone}` : ""}`}>
      <dt>{label}</dt>
      <dd>{value}</dd>
    </div>
  );
}

const CHART = { width: 720, height: 180, left: 44, bottom: 22, top: 8 };

/** Stacked bars, delivered under failed, one per hour or day, drawn as plain SVG. */
function SeriesChart({ stats, byDay }: { stats: SubscriptionStats; byDay: boolean }) {
  const series = stats.series;
  const peak = Math.max(1, ...series.map((point) => point.delivered + point.failed));
  const plotHeight = CHART.height - CHART.bottom - CHART.top;
  const slot = (CHART.width - CHART.left) / Math.max(1, series.length);
  const barWidth = Math.max(1, slot * 0.8);
  const y = (value: number) => CHART.top + plotHeight - (value / peak) * plotHeight;
  const label = (iso: string) => (byDay ? dayLabel : hourLabel).format(new Date(iso));
  // About six labels along the axis, whatever the number of bars.
  const every = Math.max(1, Math.ceil(series.length / 6));
  const delivered = series.reduce((sum, point) => sum + point.delivered, 0);
  const failed = series.reduce((sum, point) => sum + point.failed, 0);
  const summary =
    `Deliveries per ${byDay ? "day (UTC)" : "hour"}: ${count.format(delivered)} delivered, ` +
    `${count.format(failed)} failed, at most ${count.format(peak)} in one ${byDay ? "day" : "hour"}.`;
  return (
    <figure class="chart">
      <svg viewBox={`0 0 ${CHART.width} ${CHART.height}`} role="img" aria-label={summary}>
        <line class="axis" x1={CHART.left} x2={CHART.width} y1={y(0)} y2={y(0)} />
        <line class="grid" x1={CHART.left} x2={CHART.width} y1={y(peak)} y2={y(peak)} />
        <text class="tick" x={CHART.left - 6} y={y(peak) + 4} text-anchor="end">
          {count.format(peak)}
        </text>
        <text class="tick" x={CHART.left - 6} y={y(0) + 4} text-anchor="end">
          0
        </text>
        {series.map((point, i) => {
          const x = CHART.left + i * slot + (slot - barWidth) / 2;
          return (
            <g key={point.start} data-start={point.start}>
              <title>{`${label(point.start)}: ${point.delivered} delivered, ${point.failed} failed`}</title>
              <rect
                class="bar delivered"
                x={x}
                width={barWidth}
                y={y(point.delivered)}
                height={y(0) - y(point.delivered)}
              />
              <rect
                class="bar failed"
                x={x}
                width={barWidth}
                y={y(point.delivered + point.failed)}
                height={y(point.delivered) - y(point.delivered + point.failed)}
              />
              {i % every === 0 && (
                <text class="tick" x={x + barWidth / 2} y={CHART.height - 6} text-anchor="middle">
                  {label(point.start)}
                </text>
              )}
            </g>
          );
        })}
      </svg>
      <figcaption>
        <span class="key delivered">Delivered</span> <span class="key failed">Failed</span>
      </figcaption>
    </figure>
  );
}
