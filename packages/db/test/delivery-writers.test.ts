import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const SOURCE = join(import.meta.dirname, "../src");

// Every write to `deliveries` is in the module of its stage (see the header of
// delivery-leases.ts). A new writer elsewhere should be a decision, not an accident.
describe("writes to deliveries", () => {
  it("are only in events.ts, delivery-leases.ts, delivery-resends.ts, payload-erasure.ts and retention.ts", () => {
    const writers = readdirSync(SOURCE)
      .filter((file) => file.endsWith(".ts"))
      .filter((file) =>
        /\b(INSERT INTO|UPDATE|DELETE FROM)\s+deliveries\b/i.test(readFileSync(join(SOURCE, file), "utf8")),
      )
      .sort();
    expect(writers).toEqual([
      "delivery-leases.ts",
      "delivery-resends.ts",
      "events.ts",
      "payload-erasure.ts",
      "retention.ts",
    ]);
  });
});
