import { describe, expect, it } from "vitest";
import { DEFAULT_RETRY_SCHEDULE, decideRetry, parseRetryAfter } from "../src/retry-schedule.ts";

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/** docs/api.md#retry-schedule: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h. */
const schedule = [5 * SECOND, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR];
const longestStep = 10 * HOUR;
const now = new Date("2026-11-21T12:00:00.000Z");
const noJitter = () => 0.5;
const lowestJitter = () => 0;
const highestJitter = () => 1;

describe("DEFAULT_RETRY_SCHEDULE", () => {
  it("is the Standard Webhooks schedule", () => {
    expect(DEFAULT_RETRY_SCHEDULE).toBe("5s,5m,30m,2h,5h,10h,10h");
  });
});

describe("decideRetry", () => {
  it.each(schedule.map((step, index) => [index + 1, step] as const))(
    "waits step %i (%i ms) after attempt n",
    (attemptNumber, step) => {
      expect(decideRetry({ attemptNumber, responseCode: 500 }, schedule, now, noJitter)).toEqual({
        retry: true,
        delayMs: step,
      });
    },
  );

  it("gives eight attempts in all with the default schedule", () => {
    const attempts: number[] = [];
    for (let attemptNumber = 1; ; attemptNumber++) {
      attempts.push(attemptNumber);
      if (!decideRetry({ attemptNumber, responseCode: null }, schedule, now, noJitter).retry) break;
    }
    expect(attempts).toHaveLength(8);
  });

  it.each(schedule.map((step, index) => [index + 1, step] as const))(
    "keeps the jitter within ±20%% of step %i",
    (attemptNumber, step) => {
      const attempt = { attemptNumber, responseCode: 500 };
      expect(decideRetry(attempt, schedule, now, lowestJitter)).toEqual({ retry: true, delayMs: (step * 4) / 5 });
      expect(decideRetry(attempt, schedule, now, noJitter)).toEqual({ retry: true, delayMs: step });
      expect(decideRetry(attempt, schedule, now, highestJitter)).toEqual({ retry: true, delayMs: (step * 6) / 5 });
    },
  );

  it("jitters the first step to exactly 4 s, 5 s and 6 s at the bounds", () => {
    const attempt = { attemptNumber: 1, responseCode: null };
    expect(decideRetry(attempt, schedule, now, () => 0)).toEqual({ retry: true, delayMs: 4_000 });
    expect(decideRetry(attempt, schedule, now, () => 0.5)).toEqual({ retry: true, delayMs: 5_000 });
    expect(decideRetry(attempt, schedule, now, () => 1)).toEqual({ retry: true, delayMs: 6_000 });
    expect(decideRetry(attempt, schedule, now, () => 0.25)).toEqual({ retry: true, delayMs: 4_500 });
  });

  it("stays within ±20% with the real random source", () => {
    for (let i = 0; i < 1_000; i++) {
      const decision = decideRetry({ attemptNumber: 2, responseCode: 502 }, schedule);
      if (!decision.retry) throw new Error("expected a retry");
      expect(decision.delayMs).toBeGreaterThanOrEqual(4 * MINUTE);
      expect(decision.delayMs).toBeLessThanOrEqual(6 * MINUTE);
    }
  });

  it("retries after timeouts and network errors (no response code)", () => {
    expect(decideRetry({ attemptNumber: 1, responseCode: null }, schedule, now, noJitter)).toEqual({
      retry: true,
      delayMs: 5 * SECOND,
    });
  });

  it.each([300, 301, 302, 400, 401, 404, 408, 500, 502, 504])("retries after a %i", (responseCode) => {
    expect(decideRetry({ attemptNumber: 3, responseCode }, schedule, now, noJitter)).toEqual({
      retry: true,
      delayMs: 30 * MINUTE,
    });
  });

  it("stops after the last step", () => {
    expect(decideRetry({ attemptNumber: 8, responseCode: 500 }, schedule, now, noJitter)).toEqual({
      retry: false,
      reason: "exhausted",
    });
    expect(decideRetry({ attemptNumber: 9, responseCode: 500 }, schedule, now, noJitter)).toEqual({
      retry: false,
      reason: "exhausted",
    });
  });

  it("follows a configured schedule of any length", () => {
    const short = [10, 20];
    expect(decideRetry({ attemptNumber: 1, responseCode: 500 }, short, now, noJitter)).toEqual({
      retry: true,
      delayMs: 10,
    });
    expect(decideRetry({ attemptNumber: 2, responseCode: 500 }, short, now, noJitter)).toEqual({
      retry: true,
      delayMs: 20,
    });
    expect(decideRetry({ attemptNumber: 3, responseCode: 500 }, short, now, noJitter)).toEqual({
      retry: false,
      reason: "exhausted",
    });
    expect(decideRetry({ attemptNumber: 1, responseCode: 500 }, [], now, noJitter)).toEqual({
      retry: false,
      reason: "exhausted",
    });
  });

  it("ends retries on a 410, even on the first attempt", () => {
    expect(decideRetry({ attemptNumber: 1, responseCode: 410 }, schedule, now, noJitter)).toEqual({
      retry: false,
      reason: "gone",
    });
    expect(decideRetry({ attemptNumber: 4, responseCode: 410, retryAfter: "5" }, schedule, now, noJitter)).toEqual({
      retry: false,
      reason: "gone",
    });
    // "gone" wins over "exhausted": the reason reflects what the receiver said.
    expect(decideRetry({ attemptNumber: 8, responseCode: 410 }, schedule, now, noJitter)).toEqual({
      retry: false,
      reason: "gone",
    });
  });

  describe("Retry-After on 429 and 503", () => {
    it.each([429, 503])("waits at least the seconds a %i asks for", (responseCode) => {
      const decision = decideRetry({ attemptNumber: 1, responseCode, retryAfter: "120" }, schedule, now, noJitter);
      expect(decision).toEqual({ retry: true, delayMs: 120 * SECOND });
    });

    it.each([429, 503])("waits until the HTTP date a %i asks for", (responseCode) => {
      const at = new Date(now.getTime() + 90 * MINUTE).toUTCString();
      const decision = decideRetry({ attemptNumber: 2, responseCode, retryAfter: at }, schedule, now, noJitter);
      expect(decision).toEqual({ retry: true, delayMs: 90 * MINUTE });
    });

    it("keeps the scheduled wait when Retry-After asks for less", () => {
      expect(decideRetry({ attemptNumber: 3, responseCode: 429, retryAfter: "1" }, schedule, now, noJitter)).toEqual({
        retry: true,
        delayMs: 30 * MINUTE,
      });
      expect(
        decideRetry({ attemptNumber: 3, responseCode: 429, retryAfter: "0" }, schedule, now, lowestJitter),
      ).toEqual({ retry: true, delayMs: 24 * MINUTE });
      const past = new Date(now.getTime() - HOUR).toUTCString();
      expect(decideRetry({ attemptNumber: 3, responseCode: 503, retryAfter: past }, schedule, now, noJitter)).toEqual({
        retry: true,
        delayMs: 30 * MINUTE,
      });
    });

    it.each([
      ["seconds", String(7 * 24 * 3600)],
      ["an HTTP date", new Date(now.getTime() + 7 * 24 * HOUR).toUTCString()],
      ["an absurd number of seconds", "9".repeat(30)],
    ])("never waits longer than the longest step when asked for %s far away", (_case, retryAfter) => {
      for (const random of [lowestJitter, noJitter]) {
        expect(decideRetry({ attemptNumber: 1, responseCode: 429, retryAfter }, schedule, now, random)).toEqual({
          retry: true,
          delayMs: longestStep,
        });
      }
    });

    it("waits the jittered step when it is itself longer than the longest step", () => {
      const decision = decideRetry(
        { attemptNumber: 6, responseCode: 503, retryAfter: String(24 * 3600) },
        schedule,
        now,
        highestJitter,
      );
      expect(decision).toEqual({ retry: true, delayMs: 12 * HOUR });
    });

    it("never comes back sooner than asked nor later than the cap, whatever the jitter", () => {
      for (const attemptNumber of [1, 2, 3, 4, 5, 6, 7]) {
        for (const asked of [0, 1, 60, 3_600, 4 * 3_600, 11 * 3_600, 100 * 3_600]) {
          for (const r of [0, 0.1, 0.5, 0.9, 1]) {
            const decision = decideRetry(
              { attemptNumber, responseCode: 429, retryAfter: String(asked) },
              schedule,
              now,
              () => r,
            );
            if (!decision.retry) throw new Error("expected a retry");
            const jittered = Math.round((schedule[attemptNumber - 1] ?? Number.NaN) * (0.8 + 0.4 * r));
            expect(decision.delayMs).toBeGreaterThanOrEqual(Math.min(asked * SECOND, Math.max(longestStep, jittered)));
            expect(decision.delayMs).toBeGreaterThanOrEqual(jittered);
            expect(decision.delayMs).toBeLessThanOrEqual(Math.max(longestStep, jittered));
          }
        }
      }
    });

    it("ignores a Retry-After it cannot read", () => {
      expect(decideRetry({ attemptNumber: 1, responseCode: 429, retryAfter: "soon" }, schedule, now, noJitter)).toEqual(
        { retry: true, delayMs: 5 * SECOND },
      );
      expect(decideRetry({ attemptNumber: 1, responseCode: 429, retryAfter: null }, schedule, now, noJitter)).toEqual({
        retry: true,
        delayMs: 5 * SECOND,
      });
      expect(decideRetry({ attemptNumber: 1, responseCode: 429 }, schedule, now, noJitter)).toEqual({
        retry: true,
        delayMs: 5 * SECOND,
      });
    });

    it("still stops after the last step, whatever Retry-After says", () => {
      expect(decideRetry({ attemptNumber: 8, responseCode: 429, retryAfter: "10" }, schedule, now, noJitter)).toEqual({
        retry: false,
        reason: "exhausted",
      });
    });
  });

  it.each([500, 502, 200, 404, 418])("ignores Retry-After on a %i", (responseCode) => {
    const decision = decideRetry({ attemptNumber: 1, responseCode, retryAfter: "3600" }, schedule, now, noJitter);
    expect(decision).toEqual({ retry: true, delayMs: 5 * SECOND });
  });

  it("ignores Retry-After when no response arrived", () => {
    expect(decideRetry({ attemptNumber: 1, responseCode: null, retryAfter: "3600" }, schedule, now, noJitter)).toEqual({
      retry: true,
      delayMs: 5 * SECOND,
    });
  });
});

describe("parseRetryAfter", () => {
  it.each([
    ["0", 0],
    ["1", 1_000],
    ["120", 120_000],
    [" 30 ", 30_000],
    ["0030", 30_000],
  ])("reads delay-seconds %j as %i ms", (value, ms) => {
    expect(parseRetryAfter(value, now)).toBe(ms);
  });

  it("reads an IMF-fixdate relative to now", () => {
    expect(parseRetryAfter("Sat, 21 Nov 2026 12:02:30 GMT", now)).toBe(150_000);
  });

  it("reads the obsolete RFC 850 and asctime date forms", () => {
    expect(parseRetryAfter("Saturday, 21-Nov-26 12:01:00 GMT", now)).toBe(60_000);
    expect(parseRetryAfter("Sat Nov 21 12:00:10 2026", now)).toBe(10_000);
  });

  it("reads an asctime date as GMT, as HTTP dates are, on a host in another time zone", () => {
    const zone = process.env.TZ;
    process.env.TZ = "America/New_York";
    try {
      expect(parseRetryAfter("Sat Nov 21 12:00:10 2026", now)).toBe(10_000);
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
  });

  it("gives 0 for a date in the past", () => {
    expect(parseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT", now)).toBe(0);
    expect(parseRetryAfter(new Date(now.getTime() - 1_000).toUTCString(), now)).toBe(0);
  });

  it.each([undefined, null, "", "soon", "abc", "12abc", "1e3", "3.0", "Infinity", "NaN", "later, please"])(
    "gives undefined for %j",
    (value) => {
      expect(parseRetryAfter(value, now)).toBeUndefined();
    },
  );

  it.each(["1.5", "-1", "Retry in 5", "1 2"])("gives undefined for the non-date %j", (value) => {
    expect(parseRetryAfter(value, now)).toBeUndefined();
  });
});
