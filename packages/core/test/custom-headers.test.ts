import { describe, expect, it } from "vitest";
import { customHeadersProblem, mergeRequestHeaders } from "../src/custom-headers.ts";

describe("customHeadersProblem", () => {
  it("accepts up to 20 token-named headers with printable values", () => {
    const headers = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`X-Custom-${i}`, `value ${i}`]));
    expect(customHeadersProblem(headers)).toBeUndefined();
    expect(customHeadersProblem({ Authorization: "Bearer abc.def", "x-empty": "" })).toBeUndefined();
  });

  it.each([
    "Content-Type",
    "content-length",
    "HOST",
    "User-Agent",
    "webhook-id",
    "Webhook-Signature",
    "webhook-anything",
    "Connection",
    "transfer-encoding",
  ])("refuses %s, naming it", (name) => {
    expect(customHeadersProblem({ "X-Ok": "1", [name]: "x" })).toMatchObject({ header: name });
  });

  it("refuses bad names, bad values, duplicates and too much", () => {
    expect(customHeadersProblem({ "Bad Name": "x" })).toMatchObject({ header: "Bad Name" });
    expect(customHeadersProblem({ "X-A": "line\nbreak" })).toMatchObject({ header: "X-A" });
    expect(customHeadersProblem({ "X-A": "caf\u00e9" })).toMatchObject({ header: "X-A" });
    expect(customHeadersProblem({ "X-A": " padded" })).toMatchObject({ header: "X-A" });
    expect(customHeadersProblem({ "X-A": 1 })).toMatchObject({ header: "X-A" });
    expect(customHeadersProblem({ "X-A": "1", "x-a": "2" })).toMatchObject({ header: "x-a" });
    expect(customHeadersProblem(JSON.parse('{"__proto__": "x"}') as Record<string, unknown>)).toMatchObject({
      header: "__proto__",
    });
    const many = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`X-${i}`, "v"]));
    expect(customHeadersProblem(many)).toMatchObject({ message: expect.stringContaining("20") });
    expect(customHeadersProblem({ "X-Big": "v".repeat(4096) })).toMatchObject({
      message: expect.stringContaining("4096"),
    });
    expect(customHeadersProblem({ "X-Big": "v".repeat(4096 - 5) })).toBeUndefined();
  });
});

describe("mergeRequestHeaders", () => {
  it("puts custom headers under the service's own, whatever their case", () => {
    const merged = mergeRequestHeaders(
      { "X-Tenant": "acme", "Webhook-Signature": "forged", "WEBHOOK-ID": "forged", Host: "evil" },
      { "webhook-id": "evt_1", "webhook-signature": "v1,abc" },
    );
    expect(merged).toEqual({ "X-Tenant": "acme", "webhook-id": "evt_1", "webhook-signature": "v1,abc" });
  });
});
