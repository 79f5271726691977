import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  compilePayloadFilter,
  filterInstant,
  jsonEquals,
  type PayloadFilter,
  parsePayloadFilter,
  payloadFilterProblem,
} from "../src/payload-filter.ts";
import { filterVariables, payloadFilterJsonPathOf } from "../src/payload-filter-jsonpath.ts";

function matcher(filter: unknown) {
  const parsed = parsePayloadFilter(filter);
  if (!parsed.ok) throw new Error(parsed.problem.message);
  return compilePayloadFilter(parsed.condition);
}

const matches = (filter: unknown, data: Record<string, unknown>, type = "invoice.paid") =>
  matcher(filter)({ type, data });

describe("the matcher", () => {
  it("matches fields by equality, nested objects nesting", () => {
    const filter = { type: "invoice.paid", data: { currency: "usd", customer: { country: "FR" } } };
    expect(matches(filter, { currency: "usd", customer: { country: "FR", vat: true } })).toBe(true);
    expect(matches(filter, { currency: "usd", customer: { country: "DE" } })).toBe(false);
    expect(matches(filter, { currency: "usd" })).toBe(false);
    expect(matches(filter, { currency: "usd", customer: { country: "FR" } }, "invoice.created")).toBe(false);
  });

  it("takes an array value as equality of the whole array", () => {
    expect(matches({ data: { tags: ["a", "b"] } }, { tags: ["a", "b"] })).toBe(true);
    expect(matches({ data: { tags: ["a", "b"] } }, { tags: ["b", "a"] })).toBe(false);
    expect(matches({ data: { tags: ["a"] } }, { tags: "a" })).toBe(false);
    expect(matches({ data: { tags: "a" } }, { tags: ["a"] })).toBe(false);
  });

  it("compares numbers, and ISO 8601 strings as instants", () => {
    const filter = { data: { amount: { $gte: 100, $lt: 200 }, at: { $gt: "2026-01-01T00:00:00Z" } } };
    expect(matches(filter, { amount: 100, at: "2026-01-01T00:00:00.001Z" })).toBe(true);
    expect(matches(filter, { amount: 100, at: "2026-01-01T01:00:00+01:00" })).toBe(false);
    expect(matches(filter, { amount: 100, at: "2026-01-02" })).toBe(true);
    expect(matches(filter, { amount: 200, at: "2026-01-02" })).toBe(false);
    expect(matches(filter, { amount: "150", at: "2026-01-02" })).toBe(false);
    expect(matches(filter, { amount: 150, at: "tomorrow" })).toBe(false);
    expect(matches({ data: { n: { $lte: -1.5 } } }, { n: -2 })).toBe(true);
  });

  it("has $in, $nin, $exists, $startsWith and $eq on any value", () => {
    expect(matches({ data: { s: { $in: ["a", 1, null] } } }, { s: null })).toBe(true);
    expect(matches({ data: { s: { $in: ["a", 1] } } }, { s: "1" })).toBe(false);
    expect(matches({ data: { s: { $nin: ["a", 1] } } }, { s: "b" })).toBe(true);
    expect(matches({ data: { s: { $exists: true } } }, { s: null })).toBe(true);
    expect(matches({ data: { s: { $startsWith: "in_" } } }, { s: "in_123" })).toBe(true);
    expect(matches({ data: { s: { $startsWith: "in_" } } }, { s: ["in_123"] })).toBe(false);
    expect(matches({ data: { s: { $eq: { a: [1, { b: 2 }] } } } }, { s: { a: [1, { b: 2 }] } })).toBe(true);
    expect(matches({ data: { s: { $eq: {} } } }, { s: {} })).toBe(true);
  });

  it("matches a missing field only with $exists: false, $neq and $nin", () => {
    const missing = {};
    expect(matches({ data: { s: { $exists: false } } }, missing)).toBe(true);
    expect(matches({ data: { s: { $neq: 1 } } }, missing)).toBe(true);
    expect(matches({ data: { s: { $nin: [1] } } }, missing)).toBe(true);
    for (const condition of [
      null,
      1,
      { $eq: null },
      { $gt: 0 },
      { $lt: 0 },
      { $in: [null] },
      { $exists: true },
      { $startsWith: "" },
      { x: { $exists: false } },
    ]) {
      expect(matches({ data: { s: condition } }, missing), JSON.stringify(condition)).toBe(
        condition !== null && typeof condition === "object" && "x" in condition,
      );
    }
    // A field inside something that is not an object is missing too.
    expect(matches({ data: { s: { x: { $exists: false } } } }, { s: [{ x: 1 }] })).toBe(true);
    expect(matches({ data: { s: { x: 1 } } }, { s: [{ x: 1 }] })).toBe(false);
  });

  it("combines with $and, $or and $not, at the top level and inside a field", () => {
    const filter = {
      $or: [{ type: "a" }, { data: { n: { $not: { $gt: 5 } }, $and: [{ m: 1 }, { k: { $neq: 2 } }] } }],
    };
    expect(matches(filter, {}, "a")).toBe(true);
    expect(matches(filter, { n: 3, m: 1 }, "b")).toBe(true);
    expect(matches(filter, { n: 6, m: 1 }, "b")).toBe(false);
    expect(matches(filter, { m: 1, k: 2 }, "b")).toBe(false);
    expect(matches({ $not: { type: "a" } }, {}, "b")).toBe(true);
  });

  it("matches everything with {}", () => {
    expect(matches({}, {})).toBe(true);
  });

  it("reads a key named __proto__ as a key", () => {
    const filter = JSON.parse('{"data": {"__proto__": {"x": 1}}}');
    expect(matches(filter, JSON.parse('{"__proto__": {"x": 1}}'))).toBe(true);
    expect(matches(filter, { x: 1 })).toBe(false);
  });
});

describe("checking a filter", () => {
  it.each<[unknown, string]>([
    [[], "filter must be a JSON object, or null for none"],
    ["x", "filter must be a JSON object, or null for none"],
    [{ tenant: "a" }, "filter.tenant is not a field of what filters match: the top level names type or data"],
    [{ $eq: 1 }, "filter.$eq cannot be used at the top level"],
    [{ data: { n: { $gte: "soon" } } }, "filter.data.n.$gte must be a number or an ISO 8601 date-time"],
    [{ data: { n: { $regex: "x" } } }, "filter.data.n.$regex is not an operator (the operators are $eq, $neq"],
    [{ data: { n: { $in: [] } } }, "filter.data.n.$in must be a non-empty array of values"],
    [{ data: { n: { $in: 1 } } }, "filter.data.n.$in must be a non-empty array of values"],
    [{ data: { n: { $exists: "yes" } } }, "filter.data.n.$exists must be true or false"],
    [{ data: { n: { $startsWith: 1 } } }, "filter.data.n.$startsWith must be a string"],
    [{ data: { $or: [{ a: 1 }, 2] } }, "filter.data.$or[1] must be a filter (a JSON object)"],
    [{ data: { $and: [] } }, "filter.data.$and must be a non-empty array of filters"],
    [{ $not: [] }, "filter.$not must be a filter (a JSON object)"],
    [{ data: { n: {} } }, "filter.data.n is an empty object, which would match anything"],
    [{ data: { "a b": { $eq: "\u0000" } } }, 'filter.data["a b"].$eq must not contain NUL characters'],
    [{ data: { s: "\ud800" } }, "filter.data.s must be valid Unicode"],
  ])("refuses %j, naming the place", (filter, message) => {
    expect(payloadFilterProblem(filter)).toContain(message);
  });

  it("refuses nesting deeper than 10 levels, naming where", () => {
    let deep: Record<string, unknown> = { x: 1 };
    for (let i = 0; i < 8; i++) deep = { x: deep };
    expect(payloadFilterProblem({ data: deep })).toBeUndefined();
    expect(payloadFilterProblem({ data: { x: deep } })).toBe(
      `filter.data${".x".repeat(9)} is nested deeper than 10 levels`,
    );
    // Arrays count as levels too.
    expect(payloadFilterProblem({ data: { $or: [deep] } })).toMatch(/^filter\.data\.\$or\[0\](\.x)+ is nested deeper/);
  });

  it("refuses more than 4 KiB of JSON", () => {
    const big = { data: { s: { $in: Array.from({ length: 400 }, (_, i) => `value-${i}`) } } };
    expect(payloadFilterProblem(big)).toMatch(/^filter must be at most 4096 bytes of JSON \(it is \d+\)$/);
  });

  it("never throws, whatever the JSON", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (filter) => {
        const parsed = parsePayloadFilter({ data: filter });
        if (parsed.ok) {
          expect(() => compilePayloadFilter(parsed.condition)({ type: "t", data: {} })).not.toThrow();
          expect(payloadFilterJsonPathOf({ data: filter })).toEqual(expect.any(String));
        } else {
          expect(parsed.problem.message).toEqual(expect.any(String));
        }
      }),
      { numRuns: 2000 },
    );
  });
});

describe("filterInstant", () => {
  it("reads ISO 8601 date-times with a zone, and dates as midnight UTC", () => {
    expect(filterInstant("2026-01-01T01:00:00+01:00")).toBe(Date.UTC(2026, 0, 1));
    expect(filterInstant("2026-01-01")).toBe(Date.UTC(2026, 0, 1));
    expect(filterInstant("2026-01-01T00:00:00.250Z")).toBe(Date.UTC(2026, 0, 1) + 250);
    expect(filterInstant("2026-01-01T00:00:00")).toBeUndefined();
    expect(filterInstant("2026-02-30")).toBeUndefined();
    expect(filterInstant("1767225600")).toBeUndefined();
  });
});

describe("filterVariables", () => {
  it("holds the type and the instants of date strings reachable through objects", () => {
    const variables = filterVariables({
      type: "invoice.paid",
      data: {
        at: "2026-01-01",
        n: 1,
        s: "x",
        nested: { at: "2026-01-01T00:00:01Z", none: "no" },
        list: ["2026-01-01"],
      },
    });
    expect(variables).toEqual({
      type: "invoice.paid",
      instants: { data: { at: Date.UTC(2026, 0, 1), nested: { at: Date.UTC(2026, 0, 1, 0, 0, 1) } } },
    });
    expect(JSON.stringify(filterVariables({ type: "t", data: JSON.parse('{"__proto__": "2026-01-01"}') }))).toBe(
      `{"type":"t","instants":{"data":{"__proto__":${Date.UTC(2026, 0, 1)}}}}`,
    );
  });
});

describe("jsonEquals", () => {
  it("compares objects whatever their key order, arrays in order", () => {
    expect(jsonEquals({ a: 1, b: [1, { c: null }] }, { b: [1, { c: null }], a: 1 })).toBe(true);
    expect(jsonEquals({ a: 1 }, { a: 1, b: undefined })).toBe(false);
    expect(jsonEquals([1, 2], [2, 1])).toBe(false);
    expect(jsonEquals(null, {})).toBe(false);
    const filter: PayloadFilter = { data: { a: 1 } };
    expect(jsonEquals(filter, structuredClone(filter))).toBe(true);
  });
});
