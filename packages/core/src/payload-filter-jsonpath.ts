import {
  type FilterCondition,
  type FilteredEvent,
  filterInstant,
  type JsonValue,
  parsePayloadFilter,
} from "./payload-filter.ts";

/**
 * The SQL form of a payload filter: a jsonpath predicate, compiled once when the filter is saved
 * and stored beside it (`subscriptions.filter_path`, of PostgreSQL's type jsonpath). The publish
 * statement evaluates it for each subscription that wants the event, as
 * `jsonb_path_match(data, filter_path, vars, true)`, where `$` is the event's data and the
 * variables are those of `filterVariables`: `$type`, the event's type, and `$instants`, the
 * instants of its ISO 8601 strings.
 *
 * Why in SQL: the fan-out finds and inserts every delivery of an event in one statement; checking
 * the filters there keeps it one statement, reads each filter in the same snapshot as the rest
 * of the subscription (a PUT applies to every event published after it, on every API process,
 * with no cache to refresh), and sends no subscription row to the API and back.
 *
 * jsonpath's lax mode forgives what the filter language must not: it looks through arrays (`$.a.b`
 * finds `b` in every element of an array `a`, and `$.a == 1` holds for `a: [1, 2]`), and a
 * comparison of different types is "unknown", which `!` keeps unknown. So every step into a field
 * first checks that the step before it is an object, and every comparison first checks the type
 * of the value it compares: each predicate is then plainly true or false, as in
 * compilePayloadFilter. jsonpath has no parser for ISO 8601 with `Z`, hence `$instants`.
 *
 * What this produces is stored: a change to it reaches only filters saved after it, so it must
 * come with a migration step that compiles every stored filter again.
 */
export function payloadFilterJsonPath(condition: FilterCondition): string {
  return predicate(condition, { kind: "event" });
}

/** A filter as a client sends it, in its SQL form; undefined when it is invalid. */
export function payloadFilterJsonPathOf(filter: unknown): string | undefined {
  const parsed = parsePayloadFilter(filter);
  return parsed.ok ? payloadFilterJsonPath(parsed.condition) : undefined;
}

type InstantTree = { [key: string]: number | InstantTree };

/** The variables of the SQL form for one event (see payloadFilterJsonPath). */
export interface FilterVariables {
  type: string;
  instants: { type?: number; data?: InstantTree };
}

/**
 * The event's type, and the instant of each ISO 8601 string of its data that is reachable through
 * objects alone (the only places a filter compares), at the same path: `{"data": {"paid_at": ms}}`.
 */
export function filterVariables(event: FilteredEvent): FilterVariables {
  const instants: FilterVariables["instants"] = {};
  const typeInstant = instantOf(event.type);
  if (typeInstant !== undefined) instants.type = typeInstant;
  const data = instantTree(event.data);
  if (data !== undefined) instants.data = data;
  return { type: event.type, instants };
}

/** Most strings are not dates: look at the first characters before parsing. */
const instantOf = (text: string): number | undefined => {
  const first = text.charCodeAt(0);
  return first >= 48 && first <= 57 && /^\d{4}-?\d{2}-?\d{2}/.test(text) ? filterInstant(text) : undefined;
};

function instantTree(object: Record<string, unknown>): InstantTree | undefined {
  let tree: InstantTree | undefined;
  for (const key in object) {
    if (!Object.hasOwn(object, key)) continue;
    const value = object[key];
    let entry: number | InstantTree | undefined;
    if (typeof value === "string") entry = instantOf(value);
    else if (value !== null && typeof value === "object" && !Array.isArray(value)) {
      entry = instantTree(value as Record<string, unknown>);
    }
    if (entry === undefined) continue;
    // A prototype-less object: a key named "__proto__" is a key like any other.
    tree ??= Object.create(null) as InstantTree;
    tree[key] = entry;
  }
  return tree;
}

/** What a condition tests: the event itself (its type and data), or a field at a path under one of them. */
type Place = { kind: "event" } | { kind: "field"; base: "type" | "data"; keys: string[] };

const quote = (text: string) => JSON.stringify(text);

function path(place: Place & { kind: "field" }, keys = place.keys): string {
  return (place.base === "type" ? "$type" : "$") + keys.map((key) => `.${quote(key)}`).join("");
}

function instantPath(place: Place & { kind: "field" }): string {
  return `$instants.${quote(place.base)}${place.keys.map((key) => `.${quote(key)}`).join("")}`;
}

/** Every step into a field must start from an object (the data always is one). */
function objectSteps(place: Place & { kind: "field" }): string[] {
  return place.keys.flatMap((_, i) =>
    i === 0 && place.base === "data" ? [] : [`${path(place, place.keys.slice(0, i))}.type() == "object"`],
  );
}

const all = (terms: string[]) =>
  terms.length === 0 ? "exists($)" : terms.length === 1 ? terms[0]! : `(${terms.join(" && ")})`;
const any = (terms: string[]) => (terms.length === 1 ? terms[0]! : `(${terms.join(" || ")})`);

function predicate(condition: FilterCondition, place: Place): string {
  switch (condition.kind) {
    case "all":
      return all(condition.conditions.map((item) => predicate(item, place)));
    case "any":
      return any(condition.conditions.map((item) => predicate(item, place)));
    case "not":
      return `!(${predicate(condition.condition, place)})`;
    case "field":
      return predicate(condition.condition, fieldOf(place, condition.name));
  }
  if (place.kind === "event") throw new Error(`a ${condition.kind} condition cannot test the event itself`);
  const at = path(place);
  switch (condition.kind) {
    case "equals":
      return all([...objectSteps(place), ...equals(at, condition.value)]);
    case "exists": {
      const present = all([...objectSteps(place), `exists(${at})`]);
      return condition.expected ? present : `!(${present})`;
    }
    case "startsWith":
      return all([...objectSteps(place), `${at}.type() == "string"`, `${at} starts with ${quote(condition.prefix)}`]);
    case "compare": {
      const operator = { $gt: ">", $gte: ">=", $lt: "<", $lte: "<=" }[condition.operator];
      const { operand } = condition;
      // The instants hold numbers at the places of date strings, and nothing else.
      const [compared, value, steps] =
        "number" in operand
          ? [at, operand.number, objectSteps(place)]
          : [instantPath(place), operand.instant, [] as string[]];
      return all([...steps, `${compared}.type() == "number"`, `${compared} ${operator} ${number(value)}`]);
    }
  }
}

function fieldOf(place: Place, name: string): Place {
  if (place.kind === "field") return { ...place, keys: [...place.keys, name] };
  if (name !== "type" && name !== "data") throw new Error(`the event has no field ${name}`);
  return { kind: "field", base: name, keys: [] };
}

/** JSON's number syntax is a jsonpath number's too. */
const number = (value: number) => JSON.stringify(value);

/** The value at `at` equals `value`: its type, then its content (arrays in order, objects key by key). */
function equals(at: string, value: JsonValue): string[] {
  if (value === null) return [`${at}.type() == "null"`];
  if (Array.isArray(value)) {
    return [
      `${at}.type() == "array"`,
      `${at}.size() == ${value.length}`,
      ...value.flatMap((item, i) => equals(`${at}[${i}]`, item)),
    ];
  }
  if (typeof value === "object") {
    const keys = Object.keys(value);
    const others = keys.map((key) => `@.key != ${quote(key)}`).join(" && ");
    return [
      `${at}.type() == "object"`,
      // No key besides these: keyvalue() lists the object's keys.
      keys.length === 0 ? `!exists(${at}.keyvalue())` : `!exists(${at}.keyvalue() ? (${others}))`,
      ...keys.flatMap((key) => equals(`${at}.${quote(key)}`, value[key]!)),
    ];
  }
  if (typeof value === "number") return [`${at}.type() == "number"`, `${at} == ${number(value)}`];
  if (typeof value === "string") return [`${at}.type() == "string"`, `${at} == ${quote(value)}`];
  return [`${at}.type() == "boolean"`, `${at} == ${value}`];
}
