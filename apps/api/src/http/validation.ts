import { z } from "zod";
import { ApiError } from "./api-error.ts";
import { describeIssue } from "./validation-messages.ts";

// Every check a schema leaves to zod answers in our words (validation-messages.ts); a schema's own
// message still comes first. Set once, for the process, before any request is validated.
z.config({ customError: describeIssue });

/** `events[0]`, `data.customer`: the name a client would use for the offending field. */
function paramName(path: readonly PropertyKey[]): string {
  return path.reduce<string>(
    (name, key) => (typeof key === "number" ? `${name}[${key}]` : name ? `${name}.${String(key)}` : String(key)),
    "",
  );
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value = input;
  for (const key of path) {
    if (value === null || typeof value !== "object") return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

/**
 * Turns the first zod issue of a rejected request into a 400 in the error shape, naming the
 * parameter. Schemas give their own messages where a default one would be vague.
 */
export function validationError(
  error: z.ZodError,
  input: unknown,
  wording: { notUpdatable?: readonly string[] } = {},
): ApiError {
  const issue = error.issues[0];
  if (!issue) return new ApiError(400, "invalid_request_error", "parameter_invalid", "The request is invalid");

  if (issue.code === "unrecognized_keys") {
    const key = issue.keys[0] ?? "";
    const param = paramName([...issue.path, key]);
    if (issue.path.length === 0 && wording.notUpdatable?.includes(key)) {
      return new ApiError(
        400,
        "invalid_request_error",
        "parameter_not_updatable",
        `${param} cannot be changed by an update`,
        param,
      );
    }
    return new ApiError(
      400,
      "invalid_request_error",
      "parameter_unknown",
      `Received unknown parameter: ${param}`,
      param,
    );
  }

  const param = paramName(issue.path);
  if (issue.path.length > 0 && valueAt(input, issue.path) === undefined) {
    return new ApiError(400, "invalid_request_error", "parameter_missing", `${param} is required`, param);
  }
  const message = withParam(param, issue.message);
  const outOfRange =
    (issue.code === "too_small" || issue.code === "too_big") && (issue.origin === "number" || issue.origin === "int");
  const code = outOfRange ? "parameter_out_of_range" : "parameter_invalid";
  return new ApiError(400, "invalid_request_error", code, message, param || undefined);
}

/** "events must list at least 1 item": the field's name, then what its message says of it. */
function withParam(param: string, message: string): string {
  if (param === "" || message.startsWith(param)) return message;
  return /^[a-z]/.test(message) ? `${param} ${message}` : `${param}: ${message}`;
}

/**
 * A query parameter given more than once (`?limit=5&limit=6`) arrives as an array, which zod
 * would describe as "expected string, received array". Every query parameter is single-valued.
 */
export function repeatedQueryParameterError(error: z.ZodError, input: unknown): ApiError | undefined {
  for (const issue of error.issues) {
    const name = issue.path[0];
    if (typeof name === "string" && Array.isArray(valueAt(input, [name]))) {
      return new ApiError(400, "invalid_request_error", "parameter_invalid", `${name} must be given once`, name);
    }
  }
  return undefined;
}
