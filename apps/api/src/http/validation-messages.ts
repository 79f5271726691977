import type { z } from "zod";

/**
 * The messages of the API's 400s, in our words: each says what the field must be ("must list at
 * least 1 item" rather than the schema library's "Too small: expected array to have >=1 items"),
 * and validationError puts the field's name in front ("events must list at least 1 item").
 * Schemas that give a message of their own keep it; this covers every check they leave to zod.
 */
export function describeIssue(issue: z.core.$ZodRawIssue): string | undefined {
  switch (issue.code) {
    case "invalid_type":
      return issue.input === null ? `${mustBe(issue.expected)}, not null` : mustBe(issue.expected);
    case "too_small":
      return tooSmall(issue.origin, Number(issue.minimum), issue.inclusive !== false);
    case "too_big":
      return tooBig(issue.origin, Number(issue.maximum), issue.inclusive !== false);
    case "invalid_value":
      return issue.values.length === 1
        ? `must be ${JSON.stringify(issue.values[0])}`
        : `must be one of ${issue.values.map((value) => JSON.stringify(value)).join(", ")}`;
    case "invalid_format":
      return issue.format === "regex" ? "is not in the expected format" : `must be a valid ${issue.format}`;
    case "not_multiple_of":
      return `must be a multiple of ${issue.divisor}`;
    case "invalid_union":
      return closestAlternative(issue.errors);
    case "invalid_key":
      return "has a key that is not allowed";
    case "invalid_element":
      return "has an element that is not allowed";
    default:
      return undefined;
  }
}

function mustBe(expected: string): string {
  switch (expected) {
    case "string":
      return "must be a string";
    case "number":
      return "must be a number";
    case "int":
      return "must be an integer";
    case "boolean":
      return "must be true or false";
    case "array":
      return "must be an array";
    case "object":
    case "record":
      return "must be a JSON object";
    default:
      return `must be of type ${expected}`;
  }
}

function tooSmall(origin: string, minimum: number, inclusive: boolean): string {
  if (origin === "string") {
    if (minimum <= 1 && inclusive) return "must not be empty";
    return `must be at least ${minimum} characters long`;
  }
  if (origin === "array" || origin === "set") return `must list at least ${count(minimum, "item")}`;
  return inclusive ? `must be at least ${minimum}` : `must be greater than ${minimum}`;
}

function tooBig(origin: string, maximum: number, inclusive: boolean): string {
  if (origin === "string") return `must be at most ${maximum} characters long`;
  if (origin === "array" || origin === "set") return `must list at most ${count(maximum, "item")}`;
  return inclusive ? `must be at most ${maximum}` : `must be less than ${maximum}`;
}

const count = (n: number, noun: string) => `${n} ${noun}${n === 1 ? "" : "s"}`;

/**
 * A value that matched none of a union's alternatives (`"*"` or an event type name): what the
 * closest alternative says. One whose type matched and whose content did not (a name with a
 * space) says most; then a wrong type ("must be a string"); then the literal values it could be.
 */
function closestAlternative(alternatives: readonly (readonly z.core.$ZodIssue[])[]): string | undefined {
  const firsts = alternatives.flatMap((issues) => (issues[0] ? [issues[0]] : []));
  const content = firsts.find((issue) => issue.code !== "invalid_type" && issue.code !== "invalid_value");
  if (content) return content.message;
  const type = firsts.find((issue) => issue.code === "invalid_type");
  if (type) return type.message;
  const values = firsts.flatMap((issue) => (issue.code === "invalid_value" ? issue.values : []));
  return values.length > 0 ? `must be one of ${values.map((value) => JSON.stringify(value)).join(", ")}` : undefined;
}
