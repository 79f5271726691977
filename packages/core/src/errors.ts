/**
 * Domain errors. Verbs throw these; the API maps each to one HTTP status and the error shape
 * (docs/api.md#errors), so no verb knows about HTTP.
 */
export class DomainError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly param?: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** A bad value in a request: 400 invalid_request_error. */
export class ValidationError extends DomainError {}

/**
 * The credential is valid but may not do this (docs/api.md#tenant-scoped-api-keys: a tenant-scoped
 * key cannot publish events nor create portal sessions): 403 permission_error.
 */
export class PermissionError extends DomainError {
  constructor(message: string) {
    super(message, "permission_denied");
  }
}

/** An id that names nothing: 404 resource_missing. */
export class NotFoundError extends DomainError {
  constructor(message: string, param?: string) {
    super(message, "resource_missing", param);
  }
}

/**
 * A page request that cannot be served: both cursors at once, or a cursor naming no record of
 * the kind listed. It names the cursor in the data layer's terms; the transport names the
 * parameter (starting_after, ending_before).
 */
export class CursorError extends DomainError {
  constructor(
    readonly problem: "both_cursors" | "unknown_cursor",
    readonly cursor: "startingAfter" | "endingBefore",
    readonly resource: string,
    readonly cursorId: string,
  ) {
    super(
      problem === "both_cursors"
        ? "a page cannot start after one record and end before another"
        : `the cursor names no ${resource}: ${cursorId}`,
      problem === "both_cursors" ? "parameter_conflict" : "resource_missing",
    );
  }
}

/** A resource created again under a name that is taken: 409 resource_already_exists. */
export class ConflictError extends DomainError {
  constructor(message: string, param?: string) {
    super(message, "resource_already_exists", param);
  }
}

/**
 * A delivery whose event's payload was erased (docs/api.md#erase-an-events-payload) cannot be
 * sent again: 409 payload_deleted.
 */
export class PayloadDeletedError extends DomainError {
  constructor(message: string) {
    super(message, "payload_deleted");
  }
}

/**
 * A well-formed request whose payload breaks its event type's schema (docs/api.md#event-types):
 * 422 payload_invalid on `data`, so a client tells it from a malformed request.
 */
export class PayloadInvalidError extends DomainError {
  constructor(message: string) {
    super(message, "payload_invalid", "data");
  }
}

/** An Idempotency-Key sent again with a different request: 409 idempotency_error. */
export class IdempotencyConflictError extends DomainError {
  constructor(message: string) {
    super(message, "idempotency_key_reused", "Idempotency-Key");
  }
}
