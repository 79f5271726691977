import { describe, expect, it } from "vitest";
import { deliveryStatuses } from "../src/delivery-status.ts";
import { newId } from "../src/ids.ts";
import { deliveryJobSchema, jobCatalog } from "../src/jobs.ts";

describe("deliveryJobSchema", () => {
  it("accepts a delivery id", () => {
    const deliveryId = newId("delivery");
    expect(deliveryJobSchema.parse({ deliveryId })).toEqual({ deliveryId });
  });

  // Job payloads carry ids, never secrets.
  it.each([
    ["an extra secret", { deliveryId: "dlv_1", secret: "whsec_x" }],
    ["the url", { deliveryId: "dlv_1", url: "https://example.com" }],
    ["no delivery id", {}],
    ["a numeric delivery id", { deliveryId: 1 }],
  ])("refuses a payload with %s", (_case, payload) => {
    expect(deliveryJobSchema.safeParse(payload).success).toBe(false);
  });
});

describe("jobCatalog", () => {
  it("validates deliveries jobs with the payload schema", () => {
    expect(jobCatalog.deliveries.payload.safeParse({ deliveryId: "dlv_1" }).success).toBe(true);
    expect(jobCatalog.deliveries.payload.safeParse({ deliveryId: "dlv_1", secret: "x" }).success).toBe(false);
  });

  it("removes finished jobs so the same delivery id can be enqueued again", () => {
    expect(jobCatalog.deliveries.defaultJobOptions.removeOnComplete).toBe(true);
    expect(jobCatalog.deliveries.defaultJobOptions.removeOnFail).toBe(true);
  });

  it("retries our own failures with a growing backoff", () => {
    expect(jobCatalog.deliveries.defaultJobOptions.attempts).toBeGreaterThan(1);
    expect(jobCatalog.deliveries.defaultJobOptions.backoff.type).toBe("exponential");
  });
});

describe("deliveryStatuses", () => {
  it("are the three states of a delivery", () => {
    expect([...deliveryStatuses]).toEqual(["queued", "delivered", "failed"]);
  });
});
