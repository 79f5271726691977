import { OpenAPIHono } from "@hono/zod-openapi";
import type { ApiEnv } from "./types.ts";
import { repeatedQueryParameterError, validationError } from "./validation.ts";

/**
 * Every router of the API: a request that fails its route's schema becomes a 400 in the error
 * shape (docs/api.md#errors). The error is thrown so that it leaves through the one error handler.
 */
export function newRouter(): OpenAPIHono<ApiEnv> {
  return new OpenAPIHono<ApiEnv>({
    defaultHook: (result) => {
      if (!result.success) {
        const input = rawInput(result);
        throw (
          (result.target === "query" ? repeatedQueryParameterError(result.error, input) : undefined) ??
          validationError(result.error, input)
        );
      }
      return undefined;
    },
  });
}

/** The validator passes the raw input along with a failed result; zod-openapi's types omit it. */
export function rawInput(result: object): unknown {
  return (result as { data?: unknown }).data;
}
