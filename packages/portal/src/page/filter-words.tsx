import { type ComponentChildren, Fragment } from "preact";

/**
 * A payload filter (docs/api.md#payload-filters) in words, as a list of conditions a customer can
 * check against what they meant: `{"data": {"amount": {"$gte": 1000}}}` reads "data.amount is
 * 1000 or more". Every operator of the language has its sentence; the JSON stays beside it.
 */
type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

interface Condition {
  text: ComponentChildren;
  /** The conditions of $and, $or and $not. */
  children?: Condition[];
}

const isObject = (value: unknown): value is Record<string, Json> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

const value = (operand: Json) => <code>{JSON.stringify(operand)}</code>;
const values = (operand: Json) =>
  Array.isArray(operand)
    ? operand.map((item, index) => (
        <Fragment key={index}>
          {index > 0 && (index === operand.length - 1 ? " or " : ", ")}
          {value(item)}
        </Fragment>
      ))
    : value(operand);
/** A date, or a date-time: compared as an instant, so said as one ("after" rather than "greater than"). */
const isInstant = (operand: Json) => typeof operand === "string" && /^\d{4}-\d\d-\d\d/.test(operand);

function operatorCondition(field: ComponentChildren, operator: string, operand: Json): Condition {
  const instant = isInstant(operand);
  switch (operator) {
    case "$eq":
      return {
        text: (
          <>
            {field} is {value(operand)}
          </>
        ),
      };
    case "$neq":
      return {
        text: (
          <>
            {field} is not {value(operand)}, or is missing
          </>
        ),
      };
    case "$gt":
      return {
        text: (
          <>
            {field} is {instant ? "after" : "more than"} {value(operand)}
          </>
        ),
      };
    case "$gte":
      return {
        text: (
          <>
            {field} is {value(operand)} {instant ? "or later" : "or more"}
          </>
        ),
      };
    case "$lt":
      return {
        text: (
          <>
            {field} is {instant ? "before" : "less than"} {value(operand)}
          </>
        ),
      };
    case "$lte":
      return {
        text: (
          <>
            {field} is {value(operand)} {instant ? "or earlier" : "or less"}
          </>
        ),
      };
    case "$in":
      return {
        text: (
          <>
            {field} is {values(operand)}
          </>
        ),
      };
    case "$nin":
      return {
        text: (
          <>
            {field} is not {values(operand)}, or is missing
          </>
        ),
      };
    case "$exists":
      return {
        text: (
          <>
            {field} {operand === false ? "is missing" : "is present"}
          </>
        ),
      };
    case "$startsWith":
      return {
        text: (
          <>
            {field} starts with {value(operand)}
          </>
        ),
      };
    default:
      return {
        text: (
          <>
            {field}: {value(operand)}
          </>
        ),
      };
  }
}

/** The conditions on one value: a plain value is equality; an object, operators and fields. */
function valueConditions(path: string, operand: Json): Condition[] {
  const field = <code>{path}</code>;
  if (!isObject(operand))
    return [
      {
        text: (
          <>
            {field} is {value(operand)}
          </>
        ),
      },
    ];
  return Object.entries(operand).map(([key, inner]) => {
    if (key === "$and" || key === "$or") return group(key, inner, (item) => valueConditions(path, item));
    if (key === "$not") return negation(valueConditions(path, inner));
    if (key.startsWith("$")) return operatorCondition(field, key, inner);
    return { text: null, children: valueConditions(`${path}.${key}`, inner) };
  });
}

/** $not: its conditions all hold together, so the negation says "not all" when there are several. */
function negation(inner: Condition[]): Condition {
  const conditions = flatten(inner);
  return { text: conditions.length === 1 ? "this does not hold:" : "not all of these hold:", children: conditions };
}

/** $and and $or: one line per item, an item of several conditions being an "all of these" of its own. */
function group(key: "$and" | "$or", operand: Json, read: (item: Json) => Condition[]): Condition {
  const items = Array.isArray(operand) ? operand : [];
  return {
    text: key === "$and" ? "all of these:" : "at least one of these:",
    children: items.map((item) => {
      const conditions = flatten(read(item));
      return conditions.length === 1 ? conditions[0]! : { text: "all of these:", children: conditions };
    }),
  };
}

/** The top level names the event's `type` and `data`, or combines filters. */
function eventConditions(filter: Json): Condition[] {
  if (!isObject(filter)) return [];
  return Object.entries(filter).map(([key, operand]) => {
    if (key === "$and" || key === "$or") return group(key, operand, eventConditions);
    if (key === "$not") return negation(eventConditions(operand));
    return { text: null, children: valueConditions(key === "type" ? "type" : key, operand) };
  });
}

/** Nested groups without a sentence of their own (a field's several conditions) are flattened. */
function flatten(conditions: Condition[]): Condition[] {
  return conditions.flatMap((condition) =>
    condition.text === null
      ? flatten(condition.children ?? [])
      : [{ ...condition, children: condition.children && flatten(condition.children) }],
  );
}

function Conditions({ conditions }: { conditions: Condition[] }) {
  return (
    <ul class="conditions">
      {conditions.map((condition, index) => (
        <li key={index}>
          {condition.text}
          {condition.children && <Conditions conditions={condition.children} />}
        </li>
      ))}
    </ul>
  );
}

/** "Only events where: …" with the filter's conditions; every event when there is none. */
export function FilterInWords({ filter }: { filter: Record<string, unknown> | null | undefined }) {
  // JSON as the API returned it, or as JSON.parse read it.
  const conditions = flatten(eventConditions((filter ?? {}) as Json));
  if (conditions.length === 0) return <p>No filter: every event of the chosen types is sent.</p>;
  return (
    <>
      <p>Only events where {conditions.length > 1 ? "all of these hold" : "this holds"}:</p>
      <Conditions conditions={conditions} />
    </>
  );
}
