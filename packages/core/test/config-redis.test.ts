import { describe, expect, it } from "vitest";
import { loadConfig } from "../src/config.ts";
import { configError } from "./config-error.ts";

/** Where the configuration finds Redis (a node or a cluster), the queue's shards, and the timeouts on both connections. */
describe("loadConfig Redis Cluster and queue shards", () => {
  it("uses one Redis node and one queue by default", () => {
    const config = loadConfig({});
    expect(config.redisClusterNodes).toBeUndefined();
    expect(config.queueShards).toBe(1);
  });

  it("reads REDIS_CLUSTER_NODES as host:port pairs, IPv6 in brackets, spaces allowed after commas", () => {
    expect(
      loadConfig({ REDIS_CLUSTER_NODES: "10.0.0.1:7000, redis-b.internal:7001,[::1]:7002" }).redisClusterNodes,
    ).toEqual([
      { host: "10.0.0.1", port: 7000 },
      { host: "redis-b.internal", port: 7001 },
      { host: "::1", port: 7002 },
    ]);
  });

  it("refuses a REDIS_URL naming a database other than 0 with a cluster, and allows it without one", () => {
    expect(
      configError({ REDIS_CLUSTER_NODES: "127.0.0.1:7000", REDIS_URL: "redis://127.0.0.1:6379/2" }).message,
    ).toMatch(/REDIS_URL must not name a database other than 0/);
    expect(
      loadConfig({ REDIS_CLUSTER_NODES: "127.0.0.1:7000", REDIS_URL: "rediss://user:pw@127.0.0.1:6379/0" })
        .redisClusterNodes,
    ).toHaveLength(1);
    expect(loadConfig({ REDIS_URL: "redis://127.0.0.1:6379/2" }).redisUrl).toBe("redis://127.0.0.1:6379/2");
  });

  it("reads DATABASE_QUERY_TIMEOUT of 1 s or more, 30 s by default, and refuses less", () => {
    expect(loadConfig({}).databaseQueryTimeoutMs).toBe(30_000);
    expect(loadConfig({ DATABASE_QUERY_TIMEOUT: "1s" }).databaseQueryTimeoutMs).toBe(1_000);
    for (const value of ["999ms", "0", "never"])
      expect(configError({ DATABASE_QUERY_TIMEOUT: value }).message).toContain("DATABASE_QUERY_TIMEOUT");
    expect(configError({ DATABASE_QUERY_TIMEOUT: "500ms" }).message).toContain("must be at least 1s");
  });

  it("reads REDIS_SOCKET_TIMEOUT of 15 s or more, 30 s by default, and refuses less", () => {
    expect(loadConfig({}).redisSocketTimeoutMs).toBe(30_000);
    expect(loadConfig({ REDIS_SOCKET_TIMEOUT: "15s" }).redisSocketTimeoutMs).toBe(15_000);
    expect(loadConfig({ REDIS_SOCKET_TIMEOUT: "2m" }).redisSocketTimeoutMs).toBe(120_000);
    for (const value of ["14s", "500ms", "0", "soon"])
      expect(configError({ REDIS_SOCKET_TIMEOUT: value }).message).toContain("REDIS_SOCKET_TIMEOUT");
    expect(configError({ REDIS_SOCKET_TIMEOUT: "10s" }).message).toContain("must be at least 15s");
  });

  it("reads QUEUE_SHARDS from 1 to 256 and refuses anything else", () => {
    expect(loadConfig({ QUEUE_SHARDS: "1" }).queueShards).toBe(1);
    expect(loadConfig({ QUEUE_SHARDS: "256" }).queueShards).toBe(256);
    for (const value of ["0", "257", "-1", "2.5", "three"]) {
      expect(configError({ QUEUE_SHARDS: value }).message).toBe(
        `Invalid configuration: QUEUE_SHARDS must be an integer between 1 and 256 (got ${JSON.stringify(value)})`,
      );
    }
  });

  it.each([
    "10.0.0.1",
    "10.0.0.1:",
    ":7000",
    "10.0.0.1:0",
    "10.0.0.1:65536",
    "10.0.0.1:7000,",
    "redis://10.0.0.1:7000",
    "a b:7000",
  ])("refuses REDIS_CLUSTER_NODES=%j", (value) => {
    expect(configError({ REDIS_CLUSTER_NODES: value }).message).toBe(
      `Invalid configuration: REDIS_CLUSTER_NODES must be comma-separated host:port pairs such as 10.0.0.1:6379,10.0.0.2:6379 (got ${JSON.stringify(value)})`,
    );
  });
});
