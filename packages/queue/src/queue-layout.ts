import { jobCatalog } from "@webhooks/core";

/**
 * Where the deliveries queue and the gate keep their keys in Redis.
 *
 * A Redis Cluster runs a Lua script (BullMQ's, the gate's) only if every key it touches hashes to
 * one slot, and a key's slot is that of its `{hash tag}` when it has one. So on a cluster:
 * - the deliveries are spread over QUEUE_SHARDS queues, shard i with the BullMQ prefix
 *   `{<QUEUE_PREFIX>:i}`: all of one shard's keys share a slot, and the shards' tags differ, so
 *   they hash to different slots and, with several masters, mostly to different nodes;
 * - every gate key is under `{<QUEUE_PREFIX>:gate}`, since one script names the keys of several
 *   subscriptions (the origin's line) and even builds some itself;
 * - the reconciler's state is under `{<QUEUE_PREFIX>}`.
 *
 * With one Redis node and one shard (the default), the layout is the one this service always
 * used (`<QUEUE_PREFIX>:deliveries:*`, `<QUEUE_PREFIX>:gate:*`), so existing deployments keep
 * their jobs. More than one shard uses the hash-tagged layout on a single node too: it is not
 * needed there, but then a sharded deployment has one layout whatever its Redis.
 */
export interface QueueLayout {
  /** The BullMQ prefix of each shard's queue (all named `deliveries`). */
  shardPrefixes: string[];
  /** Prefix of every gate key, ending with `:`. */
  gatePrefix: string;
  reconcilerKey: string;
}

const QUEUE_NAME = jobCatalog.deliveries.queueName;

export function queueLayout(queuePrefix: string, options: { shards?: number; hashTagged?: boolean } = {}): QueueLayout {
  const shards = options.shards ?? 1;
  if (!Number.isInteger(shards) || shards < 1) throw new Error(`shards must be a positive integer, got ${shards}`);
  if (!(options.hashTagged ?? shards > 1)) {
    if (shards > 1) throw new Error("more than one shard needs the hash-tagged layout");
    return {
      shardPrefixes: [queuePrefix],
      gatePrefix: `${queuePrefix}:gate:`,
      reconcilerKey: `${queuePrefix}:${QUEUE_NAME}:reconciler`,
    };
  }
  return {
    shardPrefixes: Array.from({ length: shards }, (_, shard) => `{${queuePrefix}:${shard}}`),
    gatePrefix: `{${queuePrefix}:gate}:`,
    reconcilerKey: `{${queuePrefix}}:${QUEUE_NAME}:reconciler`,
  };
}

/** The layout a deployment uses: hash-tagged on a cluster or with more than one shard. */
export function queueLayoutFor(config: {
  queuePrefix: string;
  queueShards: number;
  redisClusterNodes: unknown[] | undefined;
}): QueueLayout {
  return queueLayout(config.queuePrefix, {
    shards: config.queueShards,
    hashTagged: config.redisClusterNodes !== undefined || config.queueShards > 1,
  });
}

/**
 * The shard of a delivery: a hash of its id, so that every caller (the API's enqueue, the
 * worker's wakes, the reconciler) finds its job in the same queue without asking Redis.
 * FNV-1a over the id's characters, then murmur3's finalizer, since FNV-1a's low bits alone
 * depend only on the characters' low bits. Changing it would strand queued jobs in the wrong
 * shard: the test pins its values.
 */
export function shardOf(deliveryId: string, shards: number): number {
  if (shards <= 1) return 0;
  let hash = 0x811c9dc5;
  for (let i = 0; i < deliveryId.length; i++) {
    hash ^= deliveryId.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b);
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2ae35);
  hash ^= hash >>> 16;
  return (hash >>> 0) % shards;
}
