import { describe, expect, it } from "vitest";
import { compileEventSchema, describePayloadProblem, type PayloadValidator } from "../src/event-schemas.ts";

function validator(schema: Record<string, unknown>): PayloadValidator {
  const compiled = compileEventSchema(schema);
  if (!compiled.ok) throw new Error(compiled.problem);
  return compiled.validate;
}

const problemOf = (validate: PayloadValidator, data: unknown) => {
  const problem = validate(data);
  return problem && describePayloadProblem(problem);
};

const invoice = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  properties: {
    amount: { type: "integer", minimum: 0 },
    currency: { enum: ["usd", "eur"] },
    paid_at: { type: "string", format: "date-time" },
    lines: { type: "array", items: { $ref: "#/$defs/line" } },
  },
  required: ["amount", "currency"],
  additionalProperties: false,
  $defs: { line: { type: "object", properties: { sku: { type: "string" } }, required: ["sku"] } },
  "x-owner": "billing",
  example: { amount: 1 },
};

describe("compileEventSchema", () => {
  it("checks payloads, naming the first failing JSON pointer and why", () => {
    const validate = validator(invoice);
    expect(validate({ amount: 1, currency: "usd", paid_at: "2026-01-01T00:00:00Z", lines: [{ sku: "a" }] })).toBe(
      undefined,
    );
    expect(problemOf(validate, { amount: 1.5, currency: "usd" })).toBe("/amount: must be integer");
    expect(problemOf(validate, { amount: 1 })).toBe("/currency: is required");
    expect(problemOf(validate, { amount: 1, currency: "usd", extra: 1 })).toBe("/extra: is not allowed by the schema");
    expect(problemOf(validate, { amount: 1, currency: "usd", paid_at: "yesterday" })).toBe(
      '/paid_at: must match format "date-time"',
    );
    expect(problemOf(validate, { amount: 1, currency: "usd", lines: [{ sku: "a" }, {}] })).toBe(
      "/lines/1/sku: is required",
    );
    expect(problemOf(validator({ type: "object", minProperties: 1 }), {})).toBe(
      "(root): must NOT have fewer than 1 properties",
    );
    expect(problemOf(validator({ type: "object", required: ["a/b~c"] }), {})).toBe("/a~1b~0c: is required");
  });

  it.each<[string, Record<string, unknown>, string]>([
    [
      "an invalid keyword value",
      { type: "objectx" },
      "is not a valid JSON Schema: schema/type must be equal to one of the allowed values",
    ],
    [
      "another draft",
      { $schema: "http://json-schema.org/draft-07/schema#" },
      "$schema must be https://json-schema.org/draft/2020-12/schema",
    ],
    [
      "a remote $ref",
      { $ref: "https://example.com/schema.json" },
      "cannot be compiled: can't resolve reference https://example.com/schema.json",
    ],
    [
      "an invalid pattern",
      { properties: { a: { pattern: "([a-z" } } },
      "cannot be compiled: Invalid regular expression",
    ],
    [
      "an unknown format",
      { properties: { a: { format: "colour" } } },
      'unknown format "colour" at path "#/properties/a": the formats checked are',
    ],
  ])("refuses %s, saying why", (_, schema, problem) => {
    const compiled = compileEventSchema(schema);
    expect(compiled.ok).toBe(false);
    if (!compiled.ok) expect(compiled.problem).toContain(problem);
  });

  it("compiles schemas declaring the same $id one after the other, each validating by its own rules", () => {
    const first = validator({ $id: "https://example.com/invoice", properties: { a: { type: "integer" } } });
    const second = validator({ $id: "https://example.com/invoice", properties: { a: { type: "string" } } });
    expect(first({ a: 1 })).toBeUndefined();
    expect(first({ a: "x" })).toBeDefined();
    expect(second({ a: "x" })).toBeUndefined();
    expect(second({ a: 1 })).toBeDefined();
  });
});
