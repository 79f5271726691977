import { connectionFailureReason, redisUnreachableMessage } from "@webhooks/core";
import { Redis } from "ioredis";

/** Undefined when Redis answers PING at `url`, else a one-line message saying how to start it. */
export async function checkRedis(url: string): Promise<string | undefined> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, connectTimeout: 3_000, retryStrategy: () => null });
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
