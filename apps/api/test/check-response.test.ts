import { checkResponse } from "@webhooks/api/testing";
import { describe, expect, it } from "vitest";
import { eventSchema } from "../src/events/schemas.ts";
import { errorSchema } from "../src/http/schemas.ts";

// The typed test calls rest on checkResponse: these show it fails a response that drifts.
const event = {
  id: "evt_1",
  object: "event",
  type: "a.b",
  data: { n: 1 },
  created_at: "2026-11-23T00:00:00.000Z",
  payload_deleted_at: null,
};
const answer = (status: number, body: unknown) => ({ status, headers: {}, body });

describe("checkResponse", () => {
  it("returns a body that matches its schema and status", () => {
    expect(checkResponse("GET /x", answer(200, event), 200, eventSchema)).toEqual(event);
  });

  it("fails another status, naming both", () => {
    expect(() => checkResponse("GET /x", answer(404, event), 200, eventSchema)).toThrow(
      "GET /x: expected status 200, got 404",
    );
  });

  it("fails a field of another type, and a missing one", () => {
    expect(() => checkResponse("GET /x", answer(200, { ...event, type: 7 }), 200, eventSchema)).toThrow(
      /does not match its documented schema[\s\S]*type/,
    );
    const { created_at: _, ...withoutTime } = event;
    expect(() => checkResponse("GET /x", answer(200, withoutTime), 200, eventSchema)).toThrow(/created_at/);
  });

  it("fails a field the schema does not document, nested too", () => {
    expect(() => checkResponse("GET /x", answer(200, { ...event, extra: 1 }), 200, eventSchema)).toThrow(
      "fields its documented schema does not describe",
    );
    const error = { error: { type: "api_error", code: "x", message: "m", request_id: "req_1" } };
    expect(checkResponse("GET /x", answer(500, error), 500, errorSchema)).toEqual(error);
    expect(() =>
      checkResponse("GET /x", answer(500, { error: { ...error.error, stack: "at ..." } }), 500, errorSchema),
    ).toThrow("does not describe");
  });
});
