import { z } from "@hono/zod-openapi";
import { parseIsoTimestamp, TENANT_ID_PATTERN, TENANT_ID_RULE } from "@webhooks/core";

/**
 * Building blocks shared by the resources' schemas. Every string a client sends is checked for
 * what PostgreSQL cannot store: NUL characters, and UTF-16 surrogates without their pair (JSON
 * can spell them as "\ud800"). Such input must be a 400, not a database error.
 */
const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Why PostgreSQL could not store this string, or undefined when it can. */
export function unstorableText(value: string): string | undefined {
  if (value.includes("\u0000")) return "must not contain NUL characters";
  if (loneSurrogate.test(value)) return "must be valid Unicode (an unpaired surrogate was found)";
  return undefined;
}

/** Deeper than this is almost certainly a mistake, and PostgreSQL's jsonb has a nesting limit. */
const MAX_JSON_DEPTH = 32;

function jsonProblem(value: unknown, depth: number): string | undefined {
  if (depth > MAX_JSON_DEPTH) return `must not be nested more than ${MAX_JSON_DEPTH} levels deep`;
  if (typeof value === "string") return unstorableText(value);
  if (Array.isArray(value)) {
    for (const item of value) {
      const problem = jsonProblem(item, depth + 1);
      if (problem) return problem;
    }
    return undefined;
  }
  if (value !== null && typeof value === "object") {
    for (const [key, item] of Object.entries(value)) {
      const problem = unstorableText(key) ?? jsonProblem(item, depth + 1);
      if (problem) return problem;
    }
  }
  return undefined;
}

export const isJsonObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value);

/**
 * A JSON object PostgreSQL can store as jsonb, `name` saying what it is in messages (none for the
 * items of an array, which the error's parameter names). z.custom passes the object through as
 * parsed; z.record would copy it key by key, and a key named "__proto__" would be lost in the copy.
 */
export const jsonObject = (name?: string) => {
  const subject = name === undefined ? "" : `${name} `;
  return z
    .custom<Record<string, unknown>>(isJsonObject, { error: `${subject}must be a JSON object` })
    .superRefine((value, ctx) => {
      const problem = jsonProblem(value, 1);
      if (problem) ctx.addIssue({ code: "custom", message: `${subject}${problem}` });
    });
};

export const text = (max: number) =>
  z
    .string()
    .max(max)
    .superRefine((value, ctx) => {
      const problem = unstorableText(value);
      if (problem) ctx.addIssue({ code: "custom", message: problem });
    });

/**
 * A date-time parameter (docs/api.md#timestamps, see parseIsoTimestamp): the instant it names, or a
 * 400 naming the parameter.
 */
export const timestampString = (name: string) => {
  const message = `${name} must be an ISO 8601 date-time with Z or an offset, such as 2026-11-21T23:36:50.123Z`;
  return z.string({ error: message }).transform((value, ctx) => {
    const instant = parseIsoTimestamp(value);
    if (instant === undefined) {
      ctx.addIssue({ code: "custom", message });
      return z.NEVER;
    }
    return instant;
  });
};

/** A query parameter that takes a date-time. */
export const timestampQuery = (name: string, description: string) =>
  timestampString(name).optional().openapi({ type: "string", format: "date-time", description });

const limitMessage = "limit must be an integer between 1 and 100";
// Digits only, so the number is an integer: no int() check, whose own message would answer a
// value past 2^53 instead of this one. Over 308 digits it is Infinity, which z.number() refuses.
export const limitQuery = z
  .string()
  .regex(/^\d+$/, limitMessage)
  .transform(Number)
  .pipe(z.number({ error: limitMessage }).min(1, limitMessage).max(100, limitMessage))
  .optional()
  .openapi({
    type: "integer",
    minimum: 1,
    maximum: 100,
    default: 20,
    description: "How many records to return, 1 to 100.",
  });

export const cursorQueries = {
  starting_after: text(64).optional().openapi({
    description: "A record id from the previous page: returns the records after it in list order (older ones).",
  }),
  ending_before: text(64)
    .optional()
    .openapi({ description: "A record id: returns the records before it in list order (newer ones)." }),
};

export const DEFAULT_PAGE_SIZE = 20;

/** A tenant id (docs/api.md#tenants), in a body or as a list filter. */
export const tenantIdField = (description: string) =>
  z
    .string({ error: `tenant_id ${TENANT_ID_RULE}` })
    .regex(TENANT_ID_PATTERN, `tenant_id ${TENANT_ID_RULE}`)
    .openapi({ description, example: "acme", pattern: TENANT_ID_PATTERN.source });

/**
 * Every resource that belongs to a tenant shows it. Without one the field is absent, so that a
 * deployment that does not use tenants sees exactly the responses it saw before they existed.
 */
export const tenantIdResponseField = z
  .string()
  .optional()
  .openapi({ description: "The tenant it belongs to. Absent when it belongs to none.", example: "acme" });

/** `{ tenant_id }` for a resource of a tenant, `{}` for one of none (see tenantIdResponseField). */
export const tenantIdJson = (tenantId: string | null): { tenant_id?: string } =>
  tenantId === null ? {} : { tenant_id: tenantId };

/** The query of a route that takes none: a parameter sent anyway is a 400 naming it. */
export const noQueryParameters = z.strictObject({});

/** The body of an action that takes no parameters: none, `{}`, or a 400 naming the unknown one. */
export const noParametersBody = z
  .strictObject({})
  .openapi("NoParameters", { description: "No parameters: send no body, or `{}`." });

export const errorSchema = z
  .object({
    error: z.object({
      type: z.enum([
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "idempotency_error",
        "rate_limit_error",
        "api_error",
      ]),
      code: z.string().openapi({ example: "parameter_out_of_range" }),
      message: z.string().openapi({ example: "limit must be an integer between 1 and 100" }),
      param: z.string().optional().openapi({ example: "limit" }),
      request_id: z.string().openapi({ example: "req_01JD5V6Y7Z8X9W0V1U2T3S4R5Q" }),
    }),
  })
  .openapi("Error");

export function listSchema<T extends z.ZodType>(item: T, name: string, url: string, order = "Records, newest first.") {
  return z
    .object({
      object: z.literal("list"),
      url: z.string().openapi({ example: url }),
      has_more: z.boolean().openapi({ description: "Whether another page exists beyond this one." }),
      data: z.array(item).openapi({ description: order }),
    })
    .openapi(name);
}

const requestIdHeader = z.object({
  "request-id": z.string().openapi({
    description: "This request's id, repeated in error bodies: quote it when reporting a problem.",
    example: "req_01JD5V6Y7Z8X9W0V1U2T3S4R5Q",
  }),
});

const retryAfterHeader = {
  "Retry-After": z.string().openapi({ description: "Seconds to wait before trying again.", example: "5" }),
};

type HeaderShape = Record<string, z.ZodType>;

/** A response's headers: `request-id`, which every response carries (request-context.ts), and `headers`. */
export const withStandardHeaders = <H extends HeaderShape = Record<never, z.ZodType>>(headers?: H) =>
  requestIdHeader.extend(headers ?? ({} as H));

/** An OpenAPI response with a JSON body and the standard headers. */
export const jsonResponse = <T, H extends HeaderShape = Record<never, z.ZodType>>(
  schema: T,
  description: string,
  headers?: H,
) => ({
  description,
  headers: withStandardHeaders(headers),
  content: { "application/json": { schema } },
});

/** Every error the API answers, by status, as the middleware in http/ and the domain can raise them. */
export const errorResponses = {
  400: jsonResponse(
    errorSchema,
    "Invalid request: a parameter is missing, malformed or unknown (`param` names it), or the body is not a JSON object",
  ),
  401: jsonResponse(errorSchema, "Missing or wrong API key, or an expired portal session token"),
  403: jsonResponse(
    errorSchema,
    "The credential is scoped to a tenant and may not do this: publish events, change the event-type catalog, create portal sessions, or create for another tenant",
  ),
  404: jsonResponse(errorSchema, "No such resource"),
  405: jsonResponse(errorSchema, "The path does not take this method", {
    Allow: z.string().openapi({ description: "The methods the path takes.", example: "GET, HEAD, PUT, DELETE" }),
  }),
  409: jsonResponse(errorSchema, "The Idempotency-Key was used before with a different request"),
  413: jsonResponse(errorSchema, "The request body is larger than BODY_LIMIT_BYTES allows"),
  422: jsonResponse(
    errorSchema,
    "`data` does not match the JSON Schema of its event type in the catalog (code payload_invalid, param data); the message names the first failing JSON pointer and why",
  ),
  415: jsonResponse(
    errorSchema,
    "The request body is not sent as JSON (Content-Type: application/json), names a charset other than utf-8, or is compressed (Content-Encoding)",
  ),
  429: jsonResponse(
    errorSchema,
    "Too many requests: over the API key's rate limit (RATE_LIMIT_PER_SECOND), or too many failed authentications from this address",
    retryAfterHeader,
  ),
  500: jsonResponse(errorSchema, "An unexpected error; quote the request id when reporting it"),
  503: jsonResponse(errorSchema, "The database cannot be reached; try again after Retry-After", retryAfterHeader),
} as const;

type ErrorStatus = keyof typeof errorResponses;
/** What any /v1 operation can answer: validation, authentication (and its throttle), the 405 matcher, the rate limit, outages. */
const everyOperationErrors = [400, 401, 405, 429, 500, 503] as const;

/** The error responses of a /v1 operation: those every operation can give, plus `extra` (404 for one resource, 413 and 415 for a body). */
export function operationErrors<S extends ErrorStatus = never>(...extra: S[]) {
  const statuses: ErrorStatus[] = [...everyOperationErrors, ...extra].sort((a, b) => a - b);
  return Object.fromEntries(statuses.map((status) => [status, errorResponses[status]])) as Pick<
    typeof errorResponses,
    (typeof everyOperationErrors)[number] | S
  >;
}

/** Timestamps leave the API as ISO 8601 UTC with milliseconds (docs/api.md#timestamps). */
export const isoTimestamp = (date: Date): string => date.toISOString();

/** The body of every error response (docs/api.md#errors). */
export type ErrorResponse = z.output<typeof errorSchema>;
