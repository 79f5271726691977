import { DEFAULT_REDIS_SOCKET_TIMEOUT_MS } from "@webhooks/core";
import { Cluster, Redis } from "ioredis";

/**
 * Redis connections as BullMQ's production guide recommends: a worker waits for Redis to come
 * back (`maxRetriesPerRequest: null`) instead of failing its blocking calls, while the API fails
 * fast (`enableOfflineQueue: false`), so a request never hangs on a Redis that is down; the
 * event is already committed in PostgreSQL and the reconciler enqueues it later. A connection
 * that waits `socketTimeoutMs` for a reply is dropped and made again, its commands sent again
 * (see DEFAULT_REDIS_SOCKET_TIMEOUT_MS): a network path that died silently costs that long, not
 * the quarter of an hour the kernel takes to give up on it.
 */
export type RedisRole = "worker" | "producer" | "gate";

/**
 * The gate (a worker's many small calls before and after each attempt) pipelines the calls made
 * in the same tick into one round trip, and fails a call after one retry rather than hang a job:
 * the job then fails for our own reason and BullMQ tries it again.
 */
export function createRedisConnection(
  url: string,
  role: RedisRole,
  socketTimeoutMs = DEFAULT_REDIS_SOCKET_TIMEOUT_MS,
): Redis {
  const redis = new Redis(url, {
    maxRetriesPerRequest: role === "worker" ? null : 1,
    enableOfflineQueue: role !== "producer",
    enableAutoPipelining: role === "gate",
    connectTimeout: 5_000,
    socketTimeout: socketTimeoutMs,
    // Keep trying to reconnect, never more than 2 s apart.
    retryStrategy: (times) => Math.min(times * 200, 2_000),
  });
  // Without a listener ioredis prints every failed reconnection; callers log state changes.
  redis.on("error", () => {});
  return redis;
}

/** A single node or a Redis Cluster: BullMQ and the gate take either. */
export type RedisConnection = Redis | Cluster;

/** Where Redis is: REDIS_URL, or the cluster's seed nodes (REDIS_URL then gives only credentials and TLS). */
export interface RedisTarget {
  redisUrl: string;
  redisClusterNodes: { host: string; port: number }[] | undefined;
  redisSocketTimeoutMs?: number;
}

/** A connection for `role` (see createRedisConnection) to the configured Redis, node or cluster. */
export function connectRedis(target: RedisTarget, role: RedisRole): RedisConnection {
  if (!target.redisClusterNodes) return createRedisConnection(target.redisUrl, role, target.redisSocketTimeoutMs);
  return createClusterConnection(target.redisClusterNodes, target.redisUrl, role, target.redisSocketTimeoutMs);
}

/**
 * The same roles on a Redis Cluster. ioredis keeps one connection per master and follows the
 * cluster's redirections (MOVED, ASK) and failovers; the per-command options go to every node's
 * connection, where BullMQ looks for `maxRetriesPerRequest: null` on a worker's.
 */
export function createClusterConnection(
  nodes: { host: string; port: number }[],
  url: string,
  role: RedisRole,
  socketTimeoutMs = DEFAULT_REDIS_SOCKET_TIMEOUT_MS,
): Cluster {
  const cluster = new Cluster(nodes, {
    enableOfflineQueue: role !== "producer",
    enableAutoPipelining: role === "gate",
    clusterRetryStrategy: (times) => Math.min(times * 200, 2_000),
    redisOptions: {
      ...clusterCredentials(url),
      maxRetriesPerRequest: role === "worker" ? null : 1,
      connectTimeout: 5_000,
      socketTimeout: socketTimeoutMs,
    },
  });
  cluster.on("error", () => {});
  return cluster;
}

/** REDIS_URL's username, password and TLS (rediss:), applied to every node of a cluster. */
export function clusterCredentials(url: string): { username?: string; password?: string; tls?: object } {
  const parsed = new URL(url);
  return {
    ...(parsed.username ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
    ...(parsed.protocol === "rediss:" ? { tls: {} } : {}),
  };
}

/**
 * BullMQ needs Redis to keep every key: with any other eviction policy Redis may drop jobs under
 * memory pressure. (Nothing is lost for good, since the reconciler re-enqueues from PostgreSQL,
 * but deliveries would be late.)
 */
export async function checkEvictionPolicy(redis: RedisConnection): Promise<string | undefined> {
  // On a cluster every master holds jobs: each must keep its keys.
  for (const node of redis instanceof Cluster ? redis.nodes("master") : [redis]) {
    const reply = (await node.config("GET", "maxmemory-policy")) as string[];
    const policy = reply[1];
    if (policy !== "noeviction") return policy;
  }
  return undefined;
}

/** Resolves once the connection is ready, or rejects after `timeoutMs`. */
export async function waitUntilConnected(redis: RedisConnection, timeoutMs = 5_000): Promise<void> {
  if (redis.status === "ready") return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      redis.off("ready", onReady);
      reject(new Error(`Redis not ready after ${timeoutMs} ms`));
    }, timeoutMs);
    const onReady = () => {
      clearTimeout(timer);
      resolve();
    };
    redis.once("ready", onReady);
  });
}

/**
 * Deletes every key under a queue prefix, in either layout (`prefix:...`, or hash-tagged
 * `{prefix...}`): for tests, whose prefix is their own. On a cluster it does nothing; the tests
 * that use one start it and remove it.
 */
export async function deleteKeysOfPrefix(redis: RedisConnection, prefix: string): Promise<void> {
  if (redis instanceof Cluster) return;
  await deleteKeysMatching(redis, `${prefix}:*`);
  await deleteKeysMatching(redis, `{${prefix}*`);
}

/** Deletes the keys of one Redis node that match a SCAN pattern, a page at a time; returns how many. */
export async function deleteKeysMatching(redis: Redis, pattern: string): Promise<number> {
  let cursor = "0";
  let deleted = 0;
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 1000);
    cursor = next;
    if (keys.length > 0) deleted += await redis.unlink(...keys);
  } while (cursor !== "0");
  return deleted;
}
