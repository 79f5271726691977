import { describe, expect, it } from "vitest";
import { parseDuration } from "../src/durations.ts";

describe("parseDuration", () => {
  it.each([
    ["250ms", 250],
    ["0ms", 0],
    ["1s", 1_000],
    ["15s", 15_000],
    ["5m", 300_000],
    ["30m", 1_800_000],
    ["2h", 7_200_000],
    ["10h", 36_000_000],
    ["1d", 86_400_000],
    ["7d", 604_800_000],
    ["0s", 0],
    ["007s", 7_000],
    [" 5s ", 5_000],
  ])("reads %j as %i ms", (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each([
    ["a bare number", "5"],
    ["a fraction", "1.5s"],
    ["a negative", "-1s"],
    ["an explicit plus", "+1s"],
    ["a space before the unit", "5 s"],
    ["an upper-case unit", "5S"],
    ["a long unit name", "5sec"],
    ["minutes spelt out", "5min"],
    ["an unknown unit", "5w"],
    ["microseconds", "5us"],
    ["two parts", "1h30m"],
    ["exponent notation", "1e3ms"],
    ["the unit alone", "s"],
    ["an empty string", ""],
    ["whitespace", "   "],
    ["ISO 8601", "PT5S"],
  ])("rejects %s (%j)", (_case, text) => {
    expect(parseDuration(text)).toBeUndefined();
  });
});
