import {
  compilePayloadFilter,
  type FilteredEvent,
  filterVariables,
  type JsonValue,
  type PayloadFilter,
  parsePayloadFilter,
  payloadFilterJsonPath,
} from "@webhooks/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { fileDatabase } from "./file-database.ts";

/**
 * The publish statement evaluates a filter's jsonpath form in PostgreSQL (core's
 * payload-filter-jsonpath.ts); core's matcher function is the language's reference. Here the two
 * must agree: on the cases that jsonpath's lax mode would get wrong if the compiler did not guard
 * them, and on thousands of generated filters and events.
 */
const file = fileDatabase();

/** What PostgreSQL answers for each event, evaluated exactly as the publish statement does. */
async function sqlMatches(filter: PayloadFilter, events: FilteredEvent[]): Promise<boolean[]> {
  const parsed = parsePayloadFilter(filter);
  if (!parsed.ok) throw new Error(`invalid filter: ${parsed.problem.message}`);
  const rows = await file.database.sql.query<{ matched: boolean | null }>(
    `SELECT jsonb_path_match(e.data, $1::jsonpath, e.vars, true) AS matched
     FROM unnest($2::jsonb[], $3::jsonb[]) WITH ORDINALITY AS e(data, vars, n) ORDER BY n`,
    [
      payloadFilterJsonPath(parsed.condition),
      events.map((event) => JSON.stringify(event.data)),
      events.map((event) => JSON.stringify(filterVariables(event))),
    ],
  );
  return rows.map((row) => {
    // Never unknown: each predicate is guarded to be plainly true or false.
    if (row.matched === null) throw new Error("jsonb_path_match answered null");
    return row.matched;
  });
}

function jsMatches(filter: PayloadFilter, events: FilteredEvent[]): boolean[] {
  const parsed = parsePayloadFilter(filter);
  if (!parsed.ok) throw new Error(`invalid filter: ${parsed.problem.message}`);
  const matches = compilePayloadFilter(parsed.condition);
  return events.map(matches);
}

const event = (data: Record<string, unknown>, type = "invoice.paid"): FilteredEvent => ({ type, data });

describe("the SQL form agrees with the matcher", () => {
  // Each case: a filter, and events with whether it matches each.
  const cases: [string, PayloadFilter, [FilteredEvent, boolean][]][] = [
    [
      "equality does not look into arrays",
      { data: { amount: 1 } },
      [
        [event({ amount: 1 }), true],
        [event({ amount: [1, 2] }), false],
        [event({ amount: "1" }), false],
        [event({}), false],
      ],
    ],
    [
      "a field is not found through an array of objects",
      { data: { customer: { id: "c1" } } },
      [
        [event({ customer: { id: "c1" } }), true],
        [event({ customer: [{ id: "c1" }] }), false],
        [event({ customer: "c1" }), false],
      ],
    ],
    [
      "an array value is equality of the whole array, in order",
      { data: { tags: ["a", "b"] } },
      [
        [event({ tags: ["a", "b"] }), true],
        [event({ tags: ["b", "a"] }), false],
        [event({ tags: ["a", "b", "c"] }), false],
        [event({ tags: "a" }), false],
        [event({ tags: [["a", "b"]] }), false],
      ],
    ],
    [
      "objects inside arrays are equal whatever their key order, with no key more",
      { data: { lines: [{ sku: "x", qty: 2 }, []] } },
      [
        [event({ lines: [{ qty: 2, sku: "x" }, []] }), true],
        [event({ lines: [{ qty: 2, sku: "x", extra: null }, []] }), false],
        [event({ lines: [{ qty: 2 }, []] }), false],
        [event({ lines: [{ qty: 2, sku: "x" }, {}] }), false],
      ],
    ],
    [
      "$neq and $nin match a missing field and a value of another type; the comparisons do not",
      { data: { status: { $neq: "paid" }, n: { $nin: [1, 2] } } },
      [
        [event({}), true],
        [event({ status: 1, n: "1" }), true],
        [event({ status: "paid" }), false],
        [event({ status: "open", n: 2 }), false],
        [event({ status: ["paid"], n: [1] }), true],
      ],
    ],
    [
      "$not of a comparison on a missing field",
      { data: { amount: { $not: { $gt: 10 } } } },
      [
        [event({}), true],
        [event({ amount: 11 }), false],
        [event({ amount: 10 }), true],
        [event({ amount: "11" }), true],
      ],
    ],
    [
      "$exists, on a nested field whose parent is missing or not an object",
      { data: { a: { b: { $exists: false } } } },
      [
        [event({}), true],
        [event({ a: 1 }), true],
        [event({ a: [{ b: 1 }] }), true],
        [event({ a: { b: null } }), false],
      ],
    ],
    [
      "ISO 8601 strings compare as instants, whatever their offset and precision",
      { data: { paid_at: { $gte: "2026-01-01T00:00:00Z", $lt: "2026-01-01T00:00:00.500Z" } } },
      [
        [event({ paid_at: "2026-01-01T00:00:00Z" }), true],
        [event({ paid_at: "2026-01-01T01:00:00.25+01:00" }), true],
        [event({ paid_at: "20260101T000000Z" }), true],
        [event({ paid_at: "2025-12-31T23:59:59.999Z" }), false],
        [event({ paid_at: "2026-01-01T00:00:00.5Z" }), false],
        [event({ paid_at: "2026-01-01" }), true],
        [event({ paid_at: "yesterday" }), false],
        [event({ paid_at: 1767225600000 }), false],
      ],
    ],
    [
      "numbers compare as numbers, not strings",
      { data: { n: { $gt: 9, $lte: 1e21 } } },
      [
        [event({ n: 10 }), true],
        [event({ n: 1e21 }), true],
        [event({ n: "10" }), false],
        [event({ n: 9 }), false],
        [event({ n: [10] }), false],
      ],
    ],
    [
      "type, $startsWith and $or at the top level",
      { $or: [{ type: { $startsWith: "invoice." } }, { data: { urgent: true } }] },
      [
        [event({}, "invoice.paid"), true],
        [event({ urgent: true }, "customer.created"), true],
        [event({ urgent: "true" }, "customer.created"), false],
        [event({}, "invoices"), false],
      ],
    ],
    [
      "field names that need quoting, and one named __proto__",
      JSON.parse('{"data": {"a.b": {"c\\"d": 1}, "__proto__": {"$exists": true}}}'),
      [
        [event(JSON.parse('{"a.b": {"c\\"d": 1}, "__proto__": 0}')), true],
        [event({ "a.b": { 'c"d': 1 } }), false],
      ],
    ],
    [
      "null equals null only, not a missing field",
      { data: { x: null } },
      [
        [event({ x: null }), true],
        [event({}), false],
        [event({ x: 0 }), false],
      ],
    ],
  ];

  it.each(cases)("%s", async (_, filter, expected) => {
    const events = expected.map(([e]) => e);
    const wanted = expected.map(([, matches]) => matches);
    expect(jsMatches(filter, events)).toEqual(wanted);
    expect(await sqlMatches(filter, events)).toEqual(wanted);
  });

  it("on generated filters and events", async () => {
    // Small domains, so that generated filters and events meet: most filters match some of the
    // events and not others (checked below, so the comparison cannot pass by matching nothing).
    const key = fc.constantFrom("a", "b", "a.b", "__proto__");
    const scalar = fc.oneof(
      fc.constant(null),
      fc.boolean(),
      fc.constantFrom(0, 1, 1.5, 1e21),
      fc.constantFrom("x", "xé"),
      fc.constantFrom("2026-01-01T00:00:00Z", "2026-01-01T01:00:00.5+01:00", "2026-01-01", "2026-01-01T00:00"),
    );
    const { value } = fc.letrec<{ value: JsonValue }>((tie) => ({
      value: fc.oneof(
        { depthSize: "small", withCrossShrink: true },
        scalar,
        fc.array(tie("value"), { maxLength: 2 }),
        fc.dictionary(key, tie("value"), { maxKeys: 2 }),
      ),
    }));
    const comparable = fc.constantFrom(0, 1, 1.5, "2026-01-01T00:00:00Z", "2026-01-01", "2025-12-31T23:00:00-01:00");
    const { fields, condition, operators } = fc.letrec<{
      fields: JsonValue;
      condition: JsonValue;
      operators: JsonValue;
    }>((tie) => ({
      // A condition on a value: a plain value, operators, or conditions on its fields.
      condition: fc.oneof(
        { depthSize: "small" },
        scalar,
        fc.array(scalar, { maxLength: 2 }),
        tie("operators"),
        tie("fields"),
      ),
      fields: fc.dictionary(key, tie("condition"), { minKeys: 1, maxKeys: 2 }),
      operators: fc
        .array(
          fc.oneof(
            fc.tuple(fc.constantFrom("$eq", "$neq"), value),
            fc.tuple(fc.constantFrom("$gt", "$gte", "$lt", "$lte"), comparable),
            fc.tuple(fc.constantFrom("$in", "$nin"), fc.array(value, { minLength: 1, maxLength: 3 })),
            fc.tuple(fc.constant("$exists"), fc.boolean()),
            fc.tuple(fc.constant("$startsWith"), fc.constantFrom("", "x", "2026")),
            fc.tuple(fc.constantFrom("$and", "$or"), fc.array(tie("condition"), { minLength: 1, maxLength: 2 })),
            fc.tuple(fc.constant("$not"), tie("fields")),
          ),
          { minLength: 1, maxLength: 2 },
        )
        .map((entries) => Object.fromEntries(entries)),
    }));
    const typeCondition = fc.oneof(
      fc.constantFrom("invoice.paid", "x"),
      fc.record({ $startsWith: fc.constantFrom("inv", "2026") }),
      fc.record({ $gte: fc.constant("2026-01-01") }),
      operators,
    );
    const { filter: anyFilter } = fc.letrec<{ filter: JsonValue }>((tie) => ({
      filter: fc.oneof(
        { depthSize: "small" },
        fc.record({ data: fields }),
        fc.record({ data: fc.oneof(fields, condition), type: typeCondition }, { requiredKeys: [] }),
        fc.record({ $or: fc.array(tie("filter"), { minLength: 1, maxLength: 2 }) }),
        fc.record({ $not: tie("filter") }),
      ),
    }));
    const filter = anyFilter.filter((candidate) => parsePayloadFilter(candidate).ok) as fc.Arbitrary<PayloadFilter>;
    const events = fc.array(
      fc.record({
        type: fc.constantFrom("invoice.paid", "x", "2026-01-01"),
        data: fc.dictionary(key, value, { minKeys: 1, maxKeys: 4 }),
      }),
      { minLength: 30, maxLength: 30 },
    );
    let mixed = 0;
    const runs = 400;
    await fc.assert(
      fc.asyncProperty(filter, events, async (f, e) => {
        const expected = jsMatches(f, e);
        expect(await sqlMatches(f, e)).toEqual(expected);
        if (expected.includes(true) && expected.includes(false)) mixed++;
      }),
      { numRuns: runs },
    );
    expect(mixed).toBeGreaterThan(runs / 8);
  }, 120_000);
});
