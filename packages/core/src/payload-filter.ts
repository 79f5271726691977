import { parseIsoTimestamp } from "./timestamps.ts";

/**
 * Payload filters: a subscription's `filter` is matched against `{"type": <event type>, "data":
 * <event data>}` when an event is published, and an event that matches the subscription's
 * `events` but not its filter gets no delivery for it (docs/api.md#payload-filters).
 *
 * This module is the language: `parsePayloadFilter` checks a filter as a client sends it and turns
 * it into a condition tree; `compilePayloadFilter` turns the tree into a matcher function, made
 * once and reused for every event. The publish statement evaluates the same tree in PostgreSQL
 * (payload-filter-jsonpath.ts); a test checks that the two agree.
 */

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** A filter as a client sends it, stored and returned as sent. */
export type PayloadFilter = { [key: string]: JsonValue };

/** What a filter is matched against. */
export interface FilteredEvent {
  type: string;
  data: Record<string, unknown>;
}

export const MAX_FILTER_DEPTH = 10;
export const MAX_FILTER_BYTES = 4096;

export type Comparison = "$gt" | "$gte" | "$lt" | "$lte";

/** A checked filter. Each node is a test of one value: the event, or a field inside it. */
export type FilterCondition =
  | { kind: "equals"; value: JsonValue }
  | { kind: "compare"; operator: Comparison; operand: { number: number } | { instant: number } }
  | { kind: "exists"; expected: boolean }
  | { kind: "startsWith"; prefix: string }
  | { kind: "field"; name: string; condition: FilterCondition }
  | { kind: "all"; conditions: FilterCondition[] }
  | { kind: "any"; conditions: FilterCondition[] }
  | { kind: "not"; condition: FilterCondition };

/** Where a problem is (`["data", "amount", "$gt"]`) and what it is. */
export interface FilterProblem {
  path: (string | number)[];
  message: string;
}

export type ParsedFilter = { ok: true; condition: FilterCondition } | { ok: false; problem: FilterProblem };

const COMPARISONS: readonly string[] = ["$gt", "$gte", "$lt", "$lte"] satisfies Comparison[];
const VALUE_OPERATORS = ["$eq", "$neq", ...COMPARISONS, "$in", "$nin", "$exists", "$startsWith"];
const LOGICAL_OPERATORS = ["$and", "$or", "$not"];
export const FILTER_OPERATORS: readonly string[] = [...VALUE_OPERATORS, ...LOGICAL_OPERATORS];
/** The fields of what a filter is matched against. */
const EVENT_FIELDS = ["type", "data"];

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value);

/**
 * The instant an ISO 8601 string names, in milliseconds since the epoch, for `$gt` and its kin: a
 * date-time with `Z` or an offset (the API's rule for every date-time), or a date alone, read as
 * midnight UTC. Undefined for anything else.
 */
export function filterInstant(text: string): number | undefined {
  const date = /^\d{4}-\d{2}-\d{2}$/.test(text) ? parseIsoTimestamp(`${text}T00:00:00Z`) : parseIsoTimestamp(text);
  return date?.getTime();
}

/** `filter.data.items[0]`: the name of a place in a filter, for messages. */
export function describeFilterPath(path: readonly (string | number)[]): string {
  return path.reduce<string>(
    (name, key) =>
      typeof key === "number"
        ? `${name}[${key}]`
        : /^[$A-Za-z_][\w$-]*$/.test(key)
          ? `${name}.${key}`
          : `${name}[${JSON.stringify(key)}]`,
    "filter",
  );
}

/** The filter's problem as one sentence naming where it is, or undefined when it is valid. */
export function payloadFilterProblem(filter: unknown): string | undefined {
  const parsed = parsePayloadFilter(filter);
  if (parsed.ok) return undefined;
  return `${describeFilterPath(parsed.problem.path)} ${parsed.problem.message}`;
}

class Invalid extends Error {
  constructor(readonly problem: FilterProblem) {
    super(problem.message);
  }
}

const fail = (path: (string | number)[], message: string): never => {
  throw new Invalid({ path, message });
};

/** Checks a filter as a client sends it: the condition tree, or the first problem found. */
export function parsePayloadFilter(filter: unknown): ParsedFilter {
  try {
    if (!isObject(filter)) fail([], "must be a JSON object, or null for none");
    const bytes = Buffer.byteLength(JSON.stringify(filter));
    if (bytes > MAX_FILTER_BYTES) fail([], `must be at most ${MAX_FILTER_BYTES} bytes of JSON (it is ${bytes})`);
    checkDepth(filter, [], 1);
    return { ok: true, condition: eventCondition(filter as Record<string, unknown>, []) };
  } catch (error) {
    if (error instanceof Invalid) return { ok: false, problem: error.problem };
    throw error;
  }
}

function checkDepth(value: unknown, path: (string | number)[], depth: number): void {
  if (value === null || typeof value !== "object") return;
  if (depth > MAX_FILTER_DEPTH) fail(path, `is nested deeper than ${MAX_FILTER_DEPTH} levels`);
  const entries = Array.isArray(value) ? value.entries() : Object.entries(value);
  for (const [key, item] of entries) checkDepth(item, [...path, key], depth + 1);
}

/** The top level: conditions on `type` and `data`, combined with $and, $or and $not. */
function eventCondition(filter: Record<string, unknown>, path: (string | number)[]): FilterCondition {
  const conditions = Object.entries(filter).map(([key, operand]): FilterCondition => {
    const at = [...path, key];
    if (LOGICAL_OPERATORS.includes(key)) return logical(key, operand, at, eventCondition);
    if (VALUE_OPERATORS.includes(key)) {
      return fail(
        at,
        "cannot be used at the top level, which names type or data (or combines filters with $and, $or, $not)",
      );
    }
    if (key.startsWith("$")) return fail(at, unknownOperator());
    if (!EVENT_FIELDS.includes(key)) {
      return fail(at, "is not a field of what filters match: the top level names type or data");
    }
    return { kind: "field", name: key, condition: valueCondition(operand, at) };
  });
  return { kind: "all", conditions };
}

const unknownOperator = () => `is not an operator (the operators are ${FILTER_OPERATORS.join(", ")})`;

/**
 * A condition on one value: a plain value means equality (an array, equality of the whole array);
 * an object holds operators and field names, all of which must hold.
 */
function valueCondition(operand: unknown, path: (string | number)[]): FilterCondition {
  if (!isObject(operand)) return { kind: "equals", value: jsonValue(operand, path) };
  const entries = Object.entries(operand);
  if (entries.length === 0) {
    fail(path, 'is an empty object, which would match anything: use {"$eq": {}} to match an empty object');
  }
  return {
    kind: "all",
    conditions: entries.map(([key, value]): FilterCondition => {
      const at = [...path, key];
      if (!key.startsWith("$")) return { kind: "field", name: storable(key, at), condition: valueCondition(value, at) };
      return operator(key, value, at);
    }),
  };
}

function operator(name: string, operand: unknown, path: (string | number)[]): FilterCondition {
  switch (name) {
    case "$eq":
      return { kind: "equals", value: jsonValue(operand, path) };
    case "$neq":
      return { kind: "not", condition: { kind: "equals", value: jsonValue(operand, path) } };
    case "$gt":
    case "$gte":
    case "$lt":
    case "$lte":
      return { kind: "compare", operator: name, operand: comparable(operand, path) };
    case "$in":
    case "$nin": {
      if (!Array.isArray(operand) || operand.length === 0) fail(path, "must be a non-empty array of values");
      const any: FilterCondition = {
        kind: "any",
        conditions: (operand as unknown[]).map((value, i) => ({
          kind: "equals",
          value: jsonValue(value, [...path, i]),
        })),
      };
      return name === "$in" ? any : { kind: "not", condition: any };
    }
    case "$exists":
      if (typeof operand !== "boolean") fail(path, "must be true or false");
      return { kind: "exists", expected: operand as boolean };
    case "$startsWith":
      if (typeof operand !== "string") fail(path, "must be a string");
      return { kind: "startsWith", prefix: storable(operand as string, path) };
    case "$and":
    case "$or":
    case "$not":
      return logical(name, operand, path, valueCondition);
    default:
      return fail(path, unknownOperator());
  }
}

/** $and and $or take a non-empty array of filters, $not one filter, each read as `read` reads its level. */
function logical(
  name: string,
  operand: unknown,
  path: (string | number)[],
  read: (operand: Record<string, unknown>, path: (string | number)[]) => FilterCondition,
): FilterCondition {
  const filter = (value: unknown, at: (string | number)[]) => {
    if (!isObject(value)) fail(at, "must be a filter (a JSON object)");
    return read(value as Record<string, unknown>, at);
  };
  if (name === "$not") return { kind: "not", condition: filter(operand, path) };
  if (!Array.isArray(operand) || operand.length === 0) fail(path, "must be a non-empty array of filters");
  const conditions = (operand as unknown[]).map((item, i) => filter(item, [...path, i]));
  return { kind: name === "$and" ? "all" : "any", conditions };
}

function comparable(operand: unknown, path: (string | number)[]): { number: number } | { instant: number } {
  if (typeof operand === "number") return { number: operand };
  const instant = typeof operand === "string" ? filterInstant(operand) : undefined;
  if (instant === undefined) {
    return fail(path, "must be a number or an ISO 8601 date-time such as 2026-01-31T12:00:00Z (or a date, 2026-01-31)");
  }
  return { instant };
}

/** Any JSON value, whose strings PostgreSQL can store and compare. */
function jsonValue(value: unknown, path: (string | number)[]): JsonValue {
  if (typeof value === "string") storable(value, path);
  else if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) jsonValue(item, [...path, i]);
  } else if (isObject(value)) {
    for (const [key, item] of Object.entries(value)) jsonValue(item, [...path, storable(key, path)]);
  }
  return value as JsonValue;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function storable(text: string, path: (string | number)[]): string {
  if (text.includes("\u0000")) fail(path, "must not contain NUL characters");
  if (LONE_SURROGATE.test(text)) fail(path, "must be valid Unicode (an unpaired surrogate was found)");
  return text;
}

/** Equality of JSON values: objects whatever their key order, arrays element by element. */
export function jsonEquals(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((item, i) => jsonEquals(item, b[i]));
  }
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a);
    return (
      keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && jsonEquals(a[key], b[key]))
    );
  }
  return false;
}

/** A test of one value; `undefined` stands for a field that is missing. */
type Test = (value: unknown) => boolean;

/**
 * The matcher of a checked filter: build it once, call it for every event. A missing field
 * matches only `$exists: false`, `$neq` and `$nin` (and whatever `$not` makes of the others).
 */
export function compilePayloadFilter(condition: FilterCondition): (event: FilteredEvent) => boolean {
  const test = compile(condition);
  return (event) => test({ type: event.type, data: event.data });
}

function compile(condition: FilterCondition): Test {
  switch (condition.kind) {
    case "equals": {
      const expected = condition.value;
      return (value) => value !== undefined && jsonEquals(value, expected);
    }
    case "compare": {
      const holds = comparisonHolds[condition.operator];
      const { operand } = condition;
      if ("number" in operand) return (value) => typeof value === "number" && holds(value, operand.number);
      return (value) => {
        const instant = typeof value === "string" ? filterInstant(value) : undefined;
        return instant !== undefined && holds(instant, operand.instant);
      };
    }
    case "exists": {
      const { expected } = condition;
      return (value) => (value !== undefined) === expected;
    }
    case "startsWith": {
      const { prefix } = condition;
      return (value) => typeof value === "string" && value.startsWith(prefix);
    }
    case "field": {
      const { name } = condition;
      const test = compile(condition.condition);
      return (value) => test(isObject(value) && Object.hasOwn(value, name) ? value[name] : undefined);
    }
    case "all": {
      const tests = condition.conditions.map(compile);
      return (value) => tests.every((test) => test(value));
    }
    case "any": {
      const tests = condition.conditions.map(compile);
      return (value) => tests.some((test) => test(value));
    }
    case "not": {
      const test = compile(condition.condition);
      return (value) => !test(value);
    }
  }
}

const comparisonHolds: Record<Comparison, (a: number, b: number) => boolean> = {
  $gt: (a, b) => a > b,
  $gte: (a, b) => a >= b,
  $lt: (a, b) => a < b,
  $lte: (a, b) => a <= b,
};
