import { describe, expect, it } from "vitest";
import {
  ALL_EVENT_TYPES,
  eventTypeSchema,
  isOperationalEventType,
  matchesEventType,
  operationalEventTypes,
  subscribedEventsSchema,
} from "../src/event-types.ts";

describe("eventTypeSchema", () => {
  it.each([
    "invoice.paid",
    "a",
    "user_created",
    "order-shipped",
    "billing:invoice.paid",
    "V2.Invoice.Paid",
    "x".repeat(255),
  ])("accepts %j", (type) => {
    expect(eventTypeSchema.parse(type)).toBe(type);
  });

  it.each([
    ["empty", ""],
    ["a space", "invoice paid"],
    ["a leading space", " invoice.paid"],
    ["a trailing newline", "invoice.paid\n"],
    ["a tab", "invoice\tpaid"],
    ["a NUL", "invoice.paid\u0000"],
    ["a slash", "invoice/paid"],
    ["a non-ASCII letter", "facture.payée"],
    ["an emoji", "invoice.💸"],
    ["the wildcard on its own", "*"],
    ["a glob", "invoice.*"],
    ["256 characters", "x".repeat(256)],
  ])("rejects %s", (_case, type) => {
    expect(eventTypeSchema.safeParse(type).success).toBe(false);
  });

  // Each row is wrapped in an array: it.each would otherwise spread the array row into arguments.
  it.each([[42], [null], [undefined], [["invoice.paid"]]])("rejects the non-string %j", (value) => {
    expect(eventTypeSchema.safeParse(value).success).toBe(false);
  });
});

describe("subscribedEventsSchema", () => {
  it("accepts a list of event types", () => {
    expect(subscribedEventsSchema.parse(["invoice.paid", "invoice.failed"])).toEqual([
      "invoice.paid",
      "invoice.failed",
    ]);
  });

  it("accepts the wildcard", () => {
    expect(ALL_EVENT_TYPES).toBe("*");
    expect(subscribedEventsSchema.parse(["*"])).toEqual(["*"]);
    expect(subscribedEventsSchema.parse(["invoice.paid", "*"])).toEqual(["invoice.paid", "*"]);
  });

  it("rejects an empty array", () => {
    expect(subscribedEventsSchema.safeParse([]).success).toBe(false);
  });

  // `events` must be an array; a bare "*" or name is not one.
  it.each(["*", "invoice.paid", null, undefined, 1, { 0: "invoice.paid" }])("rejects the non-array %j", (value) => {
    expect(subscribedEventsSchema.safeParse(value).success).toBe(false);
  });

  it("rejects an array holding an invalid name", () => {
    expect(subscribedEventsSchema.safeParse(["invoice.paid", "bad name"]).success).toBe(false);
    expect(subscribedEventsSchema.safeParse(["invoice.paid", ""]).success).toBe(false);
    expect(subscribedEventsSchema.safeParse(["invoice.paid", 7]).success).toBe(false);
  });

  it("removes repeated names, keeping the first occurrence's order", () => {
    expect(subscribedEventsSchema.parse(["b.two", "a.one", "b.two", "c.three", "a.one", "*", "*"])).toEqual([
      "b.two",
      "a.one",
      "c.three",
      "*",
    ]);
  });

  it("treats names as case-sensitive when removing repeats", () => {
    expect(subscribedEventsSchema.parse(["invoice.paid", "Invoice.Paid"])).toEqual(["invoice.paid", "Invoice.Paid"]);
  });

  it("accepts up to 256 names and rejects more", () => {
    const names = Array.from({ length: 257 }, (_, i) => `type.${i}`);
    expect(subscribedEventsSchema.parse(names.slice(0, 256))).toHaveLength(256);
    expect(subscribedEventsSchema.safeParse(names).success).toBe(false);
  });
});

describe("matchesEventType", () => {
  it("matches an exact type", () => {
    expect(matchesEventType(["invoice.paid"], "invoice.paid")).toBe(true);
    expect(matchesEventType(["user.created", "invoice.paid"], "invoice.paid")).toBe(true);
  });

  it("matches every type when subscribed to *", () => {
    for (const type of ["invoice.paid", "user.created", "a", "x".repeat(255)]) {
      expect(matchesEventType(["*"], type)).toBe(true);
      expect(matchesEventType(["user.created", "*"], type)).toBe(true);
    }
  });

  it.each([
    ["a prefix of the type", ["invoice"], "invoice.paid"],
    ["a longer type", ["invoice.paid.late"], "invoice.paid"],
    ["a suffix", ["paid"], "invoice.paid"],
    ["a glob-looking name", ["invoice.*"], "invoice.paid"],
    ["another case", ["Invoice.Paid"], "invoice.paid"],
    ["a different type", ["invoice.failed"], "invoice.paid"],
    ["nothing", [], "invoice.paid"],
  ])("does not match %s", (_case, subscribed, type) => {
    expect(matchesEventType(subscribed, type)).toBe(false);
  });

  // A subscription gets operational events only by naming them (docs/api.md#operational-events).
  it.each(Object.values(operationalEventTypes))("does not match %s with *, only by its name", (type) => {
    expect(matchesEventType(["*"], type)).toBe(false);
    expect(matchesEventType(["invoice.paid", "*"], type)).toBe(false);
    expect(matchesEventType([type], type)).toBe(true);
    expect(matchesEventType(["*", type], type)).toBe(true);
  });

  it("lets * match a type that only contains the word operational", () => {
    expect(matchesEventType(["*"], "billing.operational.review")).toBe(true);
    expect(matchesEventType(["*"], "operational")).toBe(true);
  });
});

describe("isOperationalEventType", () => {
  it("is true for the operational. prefix only", () => {
    for (const type of Object.values(operationalEventTypes)) expect(isOperationalEventType(type)).toBe(true);
    expect(isOperationalEventType("operational.anything")).toBe(true);
    for (const type of [
      "operational",
      "operationalx.y",
      "Operational.subscription.disabled",
      "billing.operational.review",
    ]) {
      expect(isOperationalEventType(type)).toBe(false);
    }
  });
});
