import { DomainError } from "@webhooks/core";
import { isDatabaseUnreachable } from "@webhooks/db";
import type { Context, ErrorHandler } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { ApiError, apiErrorFromDomain, errorBody } from "./api-error.ts";
import { NOT_JSON_MESSAGE } from "./content-type.ts";
import { DATABASE_RETRY_AFTER_SECONDS } from "./database-unavailable.ts";
import type { ApiEnv } from "./types.ts";

/** Sends an ApiError in the error shape (docs/api.md#errors), with the request's id. */
export function respond(c: Context<ApiEnv>, error: ApiError) {
  const requestId = c.var.requestId ?? "";
  return c.json(errorBody(error, requestId), error.status as ContentfulStatusCode, error.headers);
}

/** The one exit for every error: all of them leave in the same shape. */
export const handleError: ErrorHandler<ApiEnv> = (err, c) => {
  if (err instanceof ApiError) return respond(c, err);
  if (err instanceof DomainError) return respond(c, apiErrorFromDomain(err));
  if (isDatabaseUnreachable(err)) {
    // Not the client's fault and not a bug here: say so, and when to try again.
    (c.var.logger ?? console).warn({ err }, "database unreachable");
    return respond(
      c,
      new ApiError(
        503,
        "api_error",
        "service_unavailable",
        "The service is temporarily unavailable: its database cannot be reached. Try again shortly.",
        undefined,
        {
          "retry-after": String(DATABASE_RETRY_AFTER_SECONDS),
        },
      ),
    );
  }
  if (err instanceof HTTPException && err.status < 500) {
    // Raised by Hono's own middleware (e.g. basic auth); keep its headers, such as WWW-Authenticate.
    const headers = Object.fromEntries(err.getResponse().headers);
    delete headers["content-type"];
    delete headers["content-length"];
    const status = err.status as ApiError["status"];
    if (status === 401) {
      return respond(
        c,
        new ApiError(
          401,
          "authentication_error",
          "credentials_required",
          "Valid credentials are required",
          undefined,
          headers,
        ),
      );
    }
    if (status === 415) {
      // The routes' validator's own "Unsupported Media Type" says less than json-body.ts's 415s.
      return respond(
        c,
        new ApiError(415, "invalid_request_error", "unsupported_media_type", NOT_JSON_MESSAGE, undefined, headers),
      );
    }
    const code = status === 413 ? "body_too_large" : status === 404 ? "resource_missing" : "invalid_request";
    return respond(
      c,
      new ApiError(status, "invalid_request_error", code, err.message || "Invalid request", undefined, headers),
    );
  }
  // Anything else is our fault: log it with the request id, answer without any detail.
  (c.var.logger ?? console).error({ err }, "unhandled error");
  return respond(
    c,
    new ApiError(
      500,
      "api_error",
      "internal_error",
      "An unexpected error occurred. Quote the request id when reporting it.",
    ),
  );
};
