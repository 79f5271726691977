/** Nearest-rank percentile of an unsorted sample (p in 0..100). */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export type Summary = ReturnType<typeof summarize>;

export function summarize(values: readonly number[]) {
  return {
    count: values.length,
    p50: percentile(values, 50),
    p99: percentile(values, 99),
    max: values.reduce((max, value) => Math.max(max, value), Number.NEGATIVE_INFINITY),
  };
}

/** "4.62 ms", "18.3 ms"; "not delivered" for a percentile that fell on a webhook that never came (Infinity). */
export function ms(value: number): string {
  if (value === Number.POSITIVE_INFINITY) return "not delivered";
  return Number.isFinite(value) ? `${value.toFixed(Math.abs(value) < 10 ? 2 : 1)} ms` : "n/a";
}

/** "1,920". */
export function round(value: number): string {
  return Number.isFinite(value) ? Math.round(value).toLocaleString("en-US") : "n/a";
}

/** "76%" (digits: decimals). */
export function pct(share: number, digits = 0): string {
  return Number.isFinite(share) ? `${(share * 100).toFixed(digits)}%` : "n/a";
}

/** "12.3 s". */
export function seconds(value: number): string {
  return Number.isFinite(value) ? `${value.toFixed(1)} s` : "n/a";
}

/** "4.62 ms / 18.3 ms / 25.0 ms": p50 / p99 / max. */
export const latencies = (summary: Summary) => `${ms(summary.p50)} / ${ms(summary.p99)} / ${ms(summary.max)}`;

/** "1,498 of 1,500 (2 rejected)": webhooks delivered of the events sent. */
export function deliveredOf(run: { delivered: number; sent: number; rejected: number }): string {
  return `${round(run.delivered)} of ${round(run.sent)}${run.rejected ? ` (${run.rejected} rejected)` : ""}`;
}
