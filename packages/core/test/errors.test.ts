import { describe, expect, it } from "vitest";
import { DomainError, IdempotencyConflictError, NotFoundError, ValidationError } from "../src/errors.ts";

describe("domain errors", () => {
  it("carry the message, code and parameter of a validation error", () => {
    const error = new ValidationError("limit must be an integer between 1 and 100", "parameter_out_of_range", "limit");
    expect(error).toBeInstanceOf(ValidationError);
    expect(error).toBeInstanceOf(DomainError);
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe("ValidationError");
    expect(error.message).toBe("limit must be an integer between 1 and 100");
    expect(error.code).toBe("parameter_out_of_range");
    expect(error.param).toBe("limit");
  });

  it("use resource_missing for an unknown id", () => {
    const error = new NotFoundError("No such subscription: sub_1", "id");
    expect(error).toBeInstanceOf(DomainError);
    expect(error.name).toBe("NotFoundError");
    expect(error.code).toBe("resource_missing");
    expect(error.param).toBe("id");
    expect(new NotFoundError("No such route").param).toBeUndefined();
  });

  it("point an idempotency conflict at the Idempotency-Key header", () => {
    const error = new IdempotencyConflictError(
      "Keys for idempotent requests can only be used with the same parameters",
    );
    expect(error).toBeInstanceOf(DomainError);
    expect(error.name).toBe("IdempotencyConflictError");
    expect(error.code).toBe("idempotency_key_reused");
    expect(error.param).toBe("Idempotency-Key");
  });

  it("are told apart by class, as the HTTP adapter does", () => {
    const errors: DomainError[] = [
      new ValidationError("bad", "invalid"),
      new NotFoundError("missing"),
      new IdempotencyConflictError("reused"),
    ];
    expect(errors.map((error) => error instanceof NotFoundError)).toEqual([false, true, false]);
    expect(errors.map((error) => error instanceof ValidationError)).toEqual([true, false, false]);
  });
});
