const units = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const durationPattern = /^(\d+)(ms|s|m|h|d)$/;

/** Parses `250ms`, `5s`, `30m`, `2h` or `1d` into milliseconds; `undefined` for anything else. */
export function parseDuration(text: string): number | undefined {
  const match = durationPattern.exec(text.trim());
  if (!match) return undefined;
  const [, amount, unit] = match as unknown as [string, string, keyof typeof units];
  const ms = Number(amount) * units[unit];
  return Number.isSafeInteger(ms) ? ms : undefined;
}
