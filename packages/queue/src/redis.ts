import { Redis } from "ioredis";

/**
 * Redis connections as BullMQ's production guide recommends: a worker waits for Redis to come
 * back (`maxRetriesPerRequest: null`) instead of failing its blocking calls, while the API fails
 * fast (`enableOfflineQueue: false`), so a request never hangs on a Redis that is down; the
 * event is already committed in PostgreSQL and the reconciler enqueues it later.
 */
export type RedisRole = "worker" | "producer" | "gate";

/**
 * The gate (a worker's many small calls before and after each attempt) pipelines the calls made
 * in the same tick into one round trip, and fails a call after one retry rather than hang a job:
 * the job then fails for our own reason and BullMQ tries it again.
 */
export function createRedisConnection(url: string, role: RedisRole): Redis {
  const redis = new Redis(url, {
    maxRetriesPerRequest: role === "worker" ? null : 1,
    enableOfflineQueue: role !== "producer",
    enableAutoPipelining: role === "gate",
    connectTimeout: 5_000,
    // Keep trying to reconnect, never more than 2 s apart.
    retryStrategy: (times) => Math.min(times * 200, 2_000),
  });
  // Without a listener ioredis prints every failed reconnection; callers log state changes.
  redis.on("error", () => {});
  return redis;
}

/**
 * BullMQ needs Redis to keep every key: with any other eviction policy Redis may drop jobs under
 * memory pressure. (Nothing is lost for good, since the reconciler re-enqueues from PostgreSQL,
 * but deliveries would be late.)
 */
export async function checkEvictionPolicy(redis: Redis): Promise<string | undefined> {
  const reply = (await redis.config("GET", "maxmemory-policy")) as string[];
  const policy = reply[1];
  return policy === "noeviction" ? undefined : policy;
}

/** Resolves once the connection is ready, or rejects after `timeoutMs`. */
export async function waitUntilConnected(redis: Redis, timeoutMs = 5_000): Promise<void> {
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
