import { z } from "@hono/zod-openapi";

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

export const text = (max: number) =>
  z
    .string()
    .max(max)
    .superRefine((value, ctx) => {
      const problem = unstorableText(value);
      if (problem) ctx.addIssue({ code: "custom", message: problem });
    });

/** Contract §1: any ISO 8601 date-time with `Z` or an offset. */
export const timestampQuery = (name: string, description: string) =>
  z
    .string()
    .refine(
      // Year 0 does not exist for PostgreSQL; keep to years 1-9999 once in UTC.
      (value) => z.iso.datetime({ offset: true }).safeParse(value).success && new Date(value).getUTCFullYear() >= 1,
      `${name} must be an ISO 8601 date-time with Z or an offset, such as 2026-11-21T23:36:50.123Z`,
    )
    .transform((value) => new Date(value))
    .optional()
    .openapi({ type: "string", format: "date-time", description });

export const limitQuery = z
  .string()
  .regex(/^\d+$/, "limit must be an integer between 1 and 100")
  .transform(Number)
  .pipe(z.number().int().min(1, "limit must be an integer between 1 and 100").max(100, "limit must be an integer between 1 and 100"))
  .optional()
  .openapi({ type: "integer", minimum: 1, maximum: 100, default: 20, description: "How many records to return, 1 to 100." });

export const cursorQueries = {
  starting_after: text(64)
    .optional()
    .openapi({ description: "A record id from the previous page: returns the records after it in list order (older ones)." }),
  ending_before: text(64)
    .optional()
    .openapi({ description: "A record id: returns the records before it in list order (newer ones)." }),
};

export const DEFAULT_PAGE_SIZE = 20;

/** The body of an action that takes no parameters: none, `{}`, or a 400 naming the unknown one. */
export const noParametersBody = z.strictObject({}).openapi("NoParameters", { description: "No parameters: send no body, or `{}`." });

export const errorSchema = z
  .object({
    error: z.object({
      type: z.enum(["invalid_request_error", "authentication_error", "idempotency_error", "rate_limit_error", "api_error"]),
      code: z.string().openapi({ example: "parameter_out_of_range" }),
      message: z.string().openapi({ example: "limit must be an integer between 1 and 100" }),
      param: z.string().optional().openapi({ example: "limit" }),
      request_id: z.string().openapi({ example: "req_01JD5V6Y7Z8X9W0V1U2T3S4R5Q" }),
    }),
  })
  .openapi("Error");

export function listSchema<T extends z.ZodType>(item: T, name: string, url: string) {
  return z
    .object({
      object: z.literal("list"),
      url: z.string().openapi({ example: url }),
      has_more: z.boolean().openapi({ description: "Whether another page exists beyond this one." }),
      data: z.array(item).openapi({ description: "Records, newest first." }),
    })
    .openapi(name);
}

/** An OpenAPI response with a JSON body. */
export const jsonResponse = <T>(schema: T, description: string) => ({ description, content: { "application/json": { schema } } });

export const errorResponses = {
  400: { description: "Invalid request", content: { "application/json": { schema: errorSchema } } },
  401: { description: "Missing or wrong API key", content: { "application/json": { schema: errorSchema } } },
  404: { description: "No such resource", content: { "application/json": { schema: errorSchema } } },
} as const;

/** Timestamps leave the API as ISO 8601 UTC with milliseconds (contract §1). */
export const isoTimestamp = (date: Date): string => date.toISOString();
