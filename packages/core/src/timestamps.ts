/**
 * docs/api.md#timestamps: parameters take any ISO 8601 date-time with `Z` or an offset. That is
 * wider than the RFC 3339 profile (and zod's check): the minutes-only form (`2026-01-01T10:00Z`), a
 * comma before the fraction (`10:00:00,5Z`), offsets without the colon or without minutes (`+0530`,
 * `+05`), and the basic format without separators (`20260101T100000Z`). A date without a time, or a
 * time without `Z` or an offset (whose meaning depends on the reader's zone), is not one.
 */
const EXTENDED = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?(Z|[+-]\d{2}(?::?\d{2})?)$/i;
const BASIC = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(?:(\d{2})(?:[.,](\d+))?)?(Z|[+-]\d{2}(?:\d{2})?)$/i;

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/**
 * The instant a date-time names, or undefined when it is not one (see above). Fractions beyond
 * milliseconds are cut, as PostgreSQL's timestamp(3) would. The instant must fall in years
 * 1-9999 once in UTC: year 0 does not exist for PostgreSQL, and a later year has no four-digit
 * form to answer it in.
 */
export function parseIsoTimestamp(text: string): Date | undefined {
  const match = EXTENDED.exec(text) ?? BASIC.exec(text);
  if (!match) return undefined;
  const [, year, month, day, hour, minute, second = "0", fraction = "", zone = "Z"] = match;
  const [y, mo, d, h, mi, s] = [year, month, day, hour, minute, second].map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const leap = y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
  const daysInMonth = mo === 2 && leap ? 29 : DAYS_IN_MONTH[mo - 1];
  if (daysInMonth === undefined || d < 1 || d > daysInMonth || h > 23 || mi > 59 || s > 59) return undefined;

  let offsetMinutes = 0;
  if (zone.toUpperCase() !== "Z") {
    const digits = zone.slice(1).replace(":", "");
    const offsetHours = Number(digits.slice(0, 2));
    const offsetMins = Number(digits.slice(2) || "0");
    if (offsetHours > 23 || offsetMins > 59) return undefined;
    offsetMinutes = (zone.startsWith("-") ? -1 : 1) * (offsetHours * 60 + offsetMins);
  }

  // setUTCFullYear, not Date.UTC: Date.UTC reads years 0-99 as 1900-1999.
  const local = new Date(0);
  local.setUTCFullYear(y, mo - 1, d);
  local.setUTCHours(h, mi, s, Number(fraction.padEnd(3, "0").slice(0, 3)));
  const instant = new Date(local.getTime() - offsetMinutes * 60_000);
  const utcYear = instant.getUTCFullYear();
  return utcYear >= 1 && utcYear <= 9999 ? instant : undefined;
}
