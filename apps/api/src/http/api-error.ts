import {
  ConflictError,
  CursorError,
  type DomainError,
  IdempotencyConflictError,
  NotFoundError,
  PayloadDeletedError,
  PayloadInvalidError,
  PermissionError,
  ValidationError,
} from "@webhooks/core";

/** The error types (docs/api.md#errors). */
export type ErrorType =
  | "invalid_request_error"
  | "authentication_error"
  | "permission_error"
  | "idempotency_error"
  | "rate_limit_error"
  | "api_error";

/** An error that leaves the API in the error shape (docs/api.md#errors). */
export class ApiError extends Error {
  constructor(
    readonly status: 400 | 401 | 403 | 404 | 405 | 408 | 409 | 413 | 415 | 417 | 422 | 429 | 431 | 499 | 500 | 503,
    readonly type: ErrorType,
    readonly code: string,
    message: string,
    readonly param?: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = "ApiError";
  }
}

/** Maps the domain's errors to HTTP; this is the only place that knows both. */
export function apiErrorFromDomain(error: DomainError): ApiError {
  if (error instanceof CursorError) {
    const param = error.cursor === "startingAfter" ? "starting_after" : "ending_before";
    const message =
      error.problem === "both_cursors"
        ? "starting_after and ending_before cannot be used together"
        : `${param} names no ${error.resource}: ${error.cursorId}`;
    return new ApiError(400, "invalid_request_error", error.code, message, param);
  }
  if (error instanceof PermissionError)
    return new ApiError(403, "permission_error", error.code, error.message, error.param);
  if (error instanceof NotFoundError)
    return new ApiError(404, "invalid_request_error", error.code, error.message, error.param);
  if (error instanceof IdempotencyConflictError)
    return new ApiError(409, "idempotency_error", error.code, error.message, error.param);
  if (error instanceof ConflictError)
    return new ApiError(409, "invalid_request_error", error.code, error.message, error.param);
  if (error instanceof PayloadDeletedError)
    return new ApiError(409, "invalid_request_error", error.code, error.message, error.param);
  if (error instanceof PayloadInvalidError)
    return new ApiError(422, "invalid_request_error", error.code, error.message, error.param);
  if (error instanceof ValidationError)
    return new ApiError(400, "invalid_request_error", error.code, error.message, error.param);
  return new ApiError(400, "invalid_request_error", error.code, error.message, error.param);
}

export function errorBody(error: ApiError, requestId: string) {
  return {
    error: {
      type: error.type,
      code: error.code,
      message: error.message,
      ...(error.param === undefined ? {} : { param: error.param }),
      request_id: requestId,
    },
  };
}
