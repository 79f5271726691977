import { connectionFailureReason, redisUnreachableMessage } from "@webhooks/core";
import { Cluster, Redis } from "ioredis";
import { clusterCredentials, type RedisTarget } from "./redis.ts";

/**
 * Undefined when Redis answers PING (a URL, or the configured node or cluster), else a one-line
 * message saying how to start it. A cluster must answer from every master.
 */
export async function checkRedis(target: string | RedisTarget): Promise<string | undefined> {
  if (typeof target !== "string" && target.redisClusterNodes)
    return checkCluster(target.redisClusterNodes, target.redisUrl);
  const url = typeof target === "string" ? target : target.redisUrl;
  const redis = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    connectTimeout: 3_000,
    retryStrategy: () => null,
  });
  // Without retries, ioredis rejects connect() with a bare "Connection is closed."; the cause
  // (refused, unknown host, not a Redis server) only comes as an "error" event before it.
  let cause: unknown;
  redis.on("error", (error) => (cause = error));
  try {
    await redis.connect();
    await redis.ping();
    return undefined;
  } catch (error) {
    return redisUnreachableMessage(url, connectionFailureReason(cause ?? error));
  } finally {
    redis.disconnect();
  }
}

async function checkCluster(nodes: { host: string; port: number }[], url: string): Promise<string | undefined> {
  const described = `the Redis Cluster ${nodes.map((node) => `${node.host}:${node.port}`).join(",")}`;
  const cluster = new Cluster(nodes, {
    lazyConnect: true,
    enableOfflineQueue: false,
    clusterRetryStrategy: () => null,
    redisOptions: {
      maxRetriesPerRequest: 0,
      connectTimeout: 3_000,
      ...clusterCredentials(url),
    },
  });
  let cause: unknown;
  cluster.on("error", (error) => (cause = error));
  try {
    await cluster.connect();
    const info = String(await cluster.cluster("INFO"));
    if (!info.includes("cluster_state:ok"))
      return `${described} is not ready (cluster_state is not ok): check CLUSTER INFO on its nodes.`;
    await Promise.all(cluster.nodes("master").map((node) => node.ping()));
    return undefined;
  } catch (error) {
    return `Cannot reach ${described} (${connectionFailureReason(cause ?? error)}). Start it, or point REDIS_CLUSTER_NODES at its nodes.`;
  } finally {
    cluster.disconnect();
  }
}
