import { describe, expect, it } from "vitest";
import { outageBackoff } from "../src/worker-state.ts";

/**
 * How long a job that cannot reach PostgreSQL is parked: as long as the outage has lasted so far
 * (1 s to 1 min; no jitter here), the outage lasting while jobs parked meanwhile come back and
 * meet it, and over once none has for half as long again as the last park (at least 10 s).
 */
const quiet = { warn: () => {} };

describe("the worker's back-off while PostgreSQL is unreachable", () => {
  it("grows with the outage, also when a single job meets it, up to a minute", () => {
    const backoff = outageBackoff(() => 0.5);
    // One job, coming back each time its park ends: 1 s, then as long as the outage has lasted.
    let now = 0;
    const parks: number[] = [];
    for (let i = 0; i < 9; i++) {
      const park = backoff.parkFor(quiet, now);
      parks.push(park);
      now += park;
    }
    expect(parks).toEqual([1_000, 1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000]);
  });

  it("starts again at a second once no job has met the outage for half as long again as the last park", () => {
    const backoff = outageBackoff(() => 0.5);
    expect(backoff.parkFor(quiet, 0)).toBe(1_000);
    expect(backoff.parkFor(quiet, 40_000)).toBe(1_000);
    // Met again within 10 s: the same outage, 8 s old.
    expect(backoff.parkFor(quiet, 48_000)).toBe(8_000);
    // 12 s later (more than 1.5 x 8 s): a new one.
    expect(backoff.parkFor(quiet, 60_001)).toBe(1_000);
  });

  it("logs one line every 10 s, not one per job", () => {
    const lines: unknown[] = [];
    const backoff = outageBackoff(() => 0.5);
    for (let now = 0; now < 25_000; now += 100)
      backoff.parkFor({ warn: (details: unknown) => void lines.push(details) }, now);
    expect(lines).toEqual([{ outageMs: 0 }, { outageMs: 10_000 }, { outageMs: 20_000 }]);
  });
});
