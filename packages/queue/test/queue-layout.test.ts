import { newId } from "@webhooks/core";
import { describe, expect, it } from "vitest";
import { queueLayout, queueLayoutFor, shardOf } from "../src/queue-layout.ts";

describe("shardOf", () => {
  it("is stable: the same id always has the same shard, across processes and releases", () => {
    // Pinned: a changed hash would leave queued jobs in shards where nobody looks for them.
    expect(shardOf("dlv_01JDQ7ZK3M8X4V2N6P9R5T7W1Y", 3)).toBe(2);
    expect(shardOf("dlv_01JDQ7ZK3M8X4V2N6P9R5T7W1Z", 3)).toBe(0);
    expect(shardOf("dlv_01JDQ7ZK3M8X4V2N6P9R5T7W1Y", 16)).toBe(5);
    expect(shardOf("dlv_01JDQ7ZK3M8X4V2N6P9R5T7W1Z", 256)).toBe(139);
    const id = newId("delivery");
    expect(new Set(Array.from({ length: 20 }, () => shardOf(id, 7)))).toEqual(new Set([shardOf(id, 7)]));
  });

  it("puts everything in shard 0 when there is one shard", () => {
    for (let i = 0; i < 100; i++) expect(shardOf(newId("delivery"), 1)).toBe(0);
  });

  it.each([2, 3, 16])("spreads ids made in one burst (consecutive ULIDs) evenly over %i shards", (shards) => {
    const perShard = 2_000;
    const counts = new Array<number>(shards).fill(0);
    for (let i = 0; i < shards * perShard; i++) {
      const shard = shardOf(newId("delivery"), shards);
      expect(shard).toBeGreaterThanOrEqual(0);
      expect(shard).toBeLessThan(shards);
      counts[shard]! += 1;
    }
    // The standard deviation of a count is about sqrt(2000) = 45: 10% off is beyond 4 of them.
    for (const count of counts) expect(Math.abs(count - perShard)).toBeLessThan(perShard * 0.1);
  });
});

describe("queueLayout", () => {
  it("keeps the keys of a single node with one queue as they always were", () => {
    expect(queueLayout("webhooks")).toEqual({
      shardPrefixes: ["webhooks"],
      gatePrefix: "webhooks:gate:",
      reconcilerKey: "webhooks:deliveries:reconciler",
    });
    expect(queueLayoutFor({ queuePrefix: "webhooks", queueShards: 1, redisClusterNodes: undefined })).toEqual(
      queueLayout("webhooks"),
    );
  });

  it("hash-tags every key on a cluster: one tag per shard, one for the gate", () => {
    expect(
      queueLayoutFor({
        queuePrefix: "webhooks",
        queueShards: 3,
        redisClusterNodes: [{ host: "10.0.0.1", port: 7000 }],
      }),
    ).toEqual({
      shardPrefixes: ["{webhooks:0}", "{webhooks:1}", "{webhooks:2}"],
      gatePrefix: "{webhooks:gate}:",
      reconcilerKey: "{webhooks}:deliveries:reconciler",
    });
    expect(
      queueLayoutFor({ queuePrefix: "webhooks", queueShards: 1, redisClusterNodes: [{ host: "10.0.0.1", port: 7000 }] })
        .shardPrefixes,
    ).toEqual(["{webhooks:0}"]);
  });

  it("uses the hash-tagged layout for shards on a single node too", () => {
    expect(queueLayoutFor({ queuePrefix: "p", queueShards: 2, redisClusterNodes: undefined }).shardPrefixes).toEqual([
      "{p:0}",
      "{p:1}",
    ]);
    expect(() => queueLayout("p", { shards: 2, hashTagged: false })).toThrow(/hash-tagged/);
    expect(() => queueLayout("p", { shards: 0 })).toThrow(/positive integer/);
  });
});
