import { redisUnreachableMessage } from "@webhooks/core";
import { Redis } from "ioredis";

/** Undefined when Redis answers PING at `url`, else a one-line message saying how to start it. */
export async function checkRedis(url: string): Promise<string | undefined> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, connectTimeout: 3_000, retryStrategy: () => null });
  redis.on("error", () => {});
  try {
    await redis.connect();
    await redis.ping();
    return undefined;
  } catch (error) {
    return redisUnreachableMessage(url, (error as Error).message);
  } finally {
    redis.disconnect();
  }
}
