import { randomBytes } from "node:crypto";
import { startTestApi, type TestApi } from "@webhooks/api/testing";
import { type DispatchJob, loadConfig } from "@webhooks/core";
import {
  checkEvictionPolicy,
  checkRedis,
  connectRedis,
  DeliveryQueue,
  queueLayoutFor,
  shardOf,
  waitUntilConnected,
} from "@webhooks/queue";
import {
  PRIVATE_CLUSTER_REDIS_URL,
  type PrivateRedisCluster,
  sql,
  startPrivateRedisCluster,
  type TestDatabase,
  type TestReceiver,
  testEnv,
  waitFor,
} from "@webhooks/testing";
import { Redis } from "ioredis";
import { describe, expect } from "vitest";
import { shardConcurrency } from "../src/delivery-worker.ts";
import { attemptsByEvent, countByStatus, duplicates, publishBurst } from "./burst.ts";
import { workerTest } from "./fixtures.ts";
import { subscribe } from "./stack.ts";

/**
 * The queue on a real Redis Cluster (three masters on loopback, one cluster per test, since some
 * tests flush it) with QUEUE_SHARDS=3: deliveries spread over queues on different nodes, and
 * everything the single-node tests promise still holds: every event delivered, the reconciler
 * recovers lost jobs, a killed worker loses nothing, the gate's caps hold across processes.
 */
const SHARDS = 3;
/** A cluster to start, worker processes to spawn, a burst: more than the default 60 s on a busy machine. */
const HEAVY = { timeout: 150_000 };

interface ClusterSetup {
  cluster: PrivateRedisCluster;
  database: TestDatabase;
  env: Record<string, string>;
  prefix: string;
  api: TestApi;
  /** A plain connection to each master, in the order of `cluster.ports`. */
  nodes: Redis[];
}

/** The index of the master that serves `key`'s slot. */
async function nodeOf(nodes: Redis[], ports: number[], key: string): Promise<number> {
  const [first] = nodes;
  const slot = Number(await first!.cluster("KEYSLOT", key));
  const ranges = await first!.cluster("SLOTS");
  const owner = ranges.find(([start, end]) => slot >= start && slot <= end);
  return ports.indexOf(Number(owner?.[2]?.[1]));
}

/**
 * `setup(overrides)`: a cluster, a queue prefix whose shards sit on different masters, and the API
 * on both.
 */
const it = workerTest.extend(
  "setup",
  async ({ database, defer }) =>
    async (overrides: Record<string, string> = {}): Promise<ClusterSetup> => {
      const cluster = await startPrivateRedisCluster(3);
      defer(() => cluster.stop());
      const nodes = cluster.ports.map((port) => new Redis(port, "127.0.0.1"));
      defer(async () => {
        for (const node of nodes) node.disconnect();
      });
      // Where three tags land is the luck of the hash: take a prefix whose shards sit on three
      // different masters, so that the test shows them used in parallel. (In production, more
      // shards than masters, or a reshard of their slots, does the same.)
      let prefix = "";
      for (let tries = 0; tries < 200 && !prefix; tries++) {
        const candidate = `test-${randomBytes(4).toString("hex")}`;
        const layout = queueLayoutFor({ queuePrefix: candidate, queueShards: SHARDS, redisClusterNodes: [] });
        const owners = await Promise.all(
          layout.shardPrefixes.map((shardPrefix) => nodeOf(nodes, cluster.ports, `${shardPrefix}:deliveries:x`)),
        );
        if (new Set(owners).size === SHARDS) prefix = candidate;
      }
      expect(prefix).not.toBe("");
      const env = testEnv(database.url, {
        REDIS_CLUSTER_NODES: cluster.nodes,
        QUEUE_SHARDS: String(SHARDS),
        QUEUE_PREFIX: prefix,
        RECONCILE_INTERVAL: "500ms",
        DELIVERY_TIMEOUT: "10s",
        ...overrides,
      });
      const api = await startTestApi(loadConfig(env));
      defer(() => api.close());
      return { cluster, database, env, prefix, api, nodes };
    },
);

/**
 * The delivery jobs on each master right now, as `[shard, delivery id]` read from their keys
 * (`{<prefix>:<shard>}:deliveries:<id>`).
 */
async function jobsByNode(s: ClusterSetup): Promise<[number, string][][]> {
  // A delivery's own job, or a dispatch job, named for its first delivery (in the same shard).
  const pattern = new RegExp(`^\\{${s.prefix}:(\\d+)\\}:deliveries:(?:dispatch_)?(dlv_[0-9A-Z]+)$`);
  return Promise.all(
    s.nodes.map(async (node) => {
      const jobs: [number, string][] = [];
      let cursor = "0";
      do {
        const [next, keys] = await node.scan(cursor, "MATCH", `{${s.prefix}:*}:deliveries:*`, "COUNT", 1_000);
        cursor = next;
        for (const key of keys) {
          const match = pattern.exec(key);
          if (match) jobs.push([Number(match[1]), match[2]!]);
        }
      } while (cursor !== "0");
      return jobs;
    }),
  );
}

/** Every event delivered (status and receiver), every signature valid, every request in the log. */
async function expectAllDelivered(s: ClusterSetup, rx: TestReceiver, eventIds: string[], label: string, perEvent = 1) {
  await waitFor(async () => (await countByStatus(s.database.url)).delivered === eventIds.length * perEvent, {
    timeoutMs: 90_000,
    what: `${eventIds.length * perEvent} deliveries delivered`,
  });
  const counts = rx.countsById();
  const logged = await attemptsByEvent(s.database.url);
  const dup = duplicates(new Map([...counts].map(([id, n]) => [id, n - (perEvent - 1)])));
  const unknown = [...logged.values()].reduce((sum, row) => sum + row.unknown, 0);
  console.log(
    `[${label}] ${counts.size}/${eventIds.length} events received; ${dup.extra} extra requests; ${unknown} attempts with an unknown outcome`,
  );
  expect(await countByStatus(s.database.url)).toEqual({ delivered: eventIds.length * perEvent });
  expect([...counts.keys()].sort()).toEqual([...eventIds].sort());
  expect(rx.received.every((webhook) => webhook.signatureValid)).toBe(true);
  // docs/api.md#delivery-states: every request the receiver saw is an attempt in the delivery's log.
  expect([...logged.values()].every((row) => row.logged === row.attempts)).toBe(true);
  return { ...dup, unknown };
}

describe("shardConcurrency", () => {
  it("splits WORKER_CONCURRENCY over the shards, at least one slot each", () => {
    const split = (concurrency: number, shards: number) =>
      Array.from({ length: shards }, (_, shard) => shardConcurrency(concurrency, shards, shard));
    expect(split(100, 1)).toEqual([100]);
    expect(split(100, 3)).toEqual([34, 33, 33]);
    expect(split(10, 4)).toEqual([3, 3, 2, 2]);
    expect(split(2, 3)).toEqual([1, 1, 1]);
  });
});

describe("on a Redis Cluster with QUEUE_SHARDS=3", () => {
  it(
    "delivers a burst once each through two worker processes, its jobs spread over the masters",
    HEAVY,
    async ({ setup, receiver, workerProcess }) => {
      const s = await setup({ WORKER_CONCURRENCY: "12" });
      // Each shard's keys share one slot, and the shards' slots differ.
      const layout = queueLayoutFor({ queuePrefix: s.prefix, queueShards: SHARDS, redisClusterNodes: [] });
      const slots = await Promise.all(
        layout.shardPrefixes.map((prefix) => s.nodes[0]!.cluster("KEYSLOT", `${prefix}:deliveries:any`)),
      );
      expect(new Set(slots).size).toBe(SHARDS);
      expect(await s.nodes[0]!.cluster("KEYSLOT", `${layout.shardPrefixes[1]}:deliveries:wait`)).toBe(slots[1]);

      // A receiver slow enough that a backlog forms, so jobs are in Redis while we look.
      const rx = await receiver(() => ({ status: 200, delayMs: 100 }));
      rx.secrets.push((await subscribe(s.api, { url: rx.url })).secret);
      await workerProcess(s.env);
      await workerProcess(s.env);

      const nodesWithJobs = new Set<number>();
      const shardsSeen = new Set<number>();
      const misplaced: string[] = [];
      const look = async () => {
        (await jobsByNode(s)).forEach((jobs, node) => {
          if (jobs.length > 0) nodesWithJobs.add(node);
          for (const [shard, id] of jobs) {
            shardsSeen.add(shard);
            if (shardOf(id, SHARDS) !== shard) misplaced.push(`${id} in shard ${shard}`);
          }
        });
      };
      const eventIds = await publishBurst(s.api, 300, {
        onProgress: async (published) => (published % 50 === 0 ? look() : undefined),
      });
      await look();

      const { extra } = await expectAllDelivered(s, rx, eventIds, "cluster burst");
      expect(extra).toBe(0);
      expect(misplaced).toEqual([]);
      expect(shardsSeen).toEqual(new Set([0, 1, 2]));
      expect(nodesWithJobs.size).toBe(3);
    },
  );

  it(
    "recovers jobs removed one by one and a FLUSHALL of every master mid-burst (the reconciler)",
    HEAVY,
    async ({ setup, receiver, inProcessWorker }) => {
      const s = await setup({ WORKER_CONCURRENCY: "30" });
      const rx = await receiver(() => ({ status: 200, delayMs: 20 }));
      rx.secrets.push((await subscribe(s.api, { url: rx.url })).secret);
      await inProcessWorker(s.env);

      let removed = 0;
      let flushed = false;
      const eventIds = await publishBurst(s.api, 400, {
        onProgress: async (published) => {
          if (published === 100) {
            // Lose some jobs, each from its own shard's queue (a job running right now is locked).
            const queued = await sql<{ id: string }>(
              s.database.url,
              "SELECT id FROM deliveries WHERE status = 'queued' ORDER BY id DESC LIMIT 30",
            );
            for (const { id } of queued)
              removed += await s.api.queue
                .queueOf(id)
                .remove(id)
                .catch(() => 0);
          }
          if (published >= 250 && !flushed) {
            flushed = true;
            await Promise.all(s.nodes.map((node) => node.flushall()));
          }
        },
      });
      expect(removed).toBeGreaterThan(0);
      expect(flushed).toBe(true);
      await expectAllDelivered(s, rx, eventIds, "cluster reconciler");
      // The reconciler's state is back, on the cluster, after the flush took it.
      const reconcilerNode = await nodeOf(
        s.nodes,
        s.cluster.ports,
        queueLayoutFor({ queuePrefix: s.prefix, queueShards: SHARDS, redisClusterNodes: [] }).reconcilerKey,
      );
      await waitFor(
        () =>
          s.nodes[reconcilerNode]!.exists(
            queueLayoutFor({ queuePrefix: s.prefix, queueShards: SHARDS, redisClusterNodes: [] }).reconcilerKey,
          ),
        {
          what: "the reconciler's state",
        },
      );
    },
  );

  it(
    "makes the reconciler's next pass a full one when one master loses its data alone (its shards' marks go with it)",
    HEAVY,
    async ({ setup }) => {
      const s = await setup();
      const { queue } = s.api;
      const { token } = await queue.beginReconcilerPass();
      expect(await queue.saveReconcilerState({ watermark: new Date(), sweep: undefined }, token)).toBe(true);
      expect((await queue.beginReconcilerPass()).state).toBeDefined();
      // A master that holds a shard but not the reconciler's state restarts empty: the state
      // survives on its own node, and would have the next pass look only at what came due since.
      const stateNode = await nodeOf(s.nodes, s.cluster.ports, queue.layout.reconcilerKey);
      const shardNodes = await Promise.all(
        queue.layout.shardPrefixes.map((prefix) => nodeOf(s.nodes, s.cluster.ports, `${prefix}:deliveries:x`)),
      );
      const lost = shardNodes.find((node) => node !== stateNode)!;
      await s.nodes[lost]!.flushall();
      expect(await s.nodes[stateNode]!.exists(queue.layout.reconcilerKey)).toBe(1);
      expect((await queue.beginReconcilerPass()).state).toBeUndefined();
    },
  );

  it(
    "loses nothing when a worker process is killed with SIGKILL mid-burst",
    HEAVY,
    async ({ setup, receiver, workerProcess }) => {
      const s = await setup({
        WORKER_CONCURRENCY: "18",
        JOB_LOCK_DURATION: "2s",
        DELIVERY_TIMEOUT: "3s",
        DEFAULT_MAX_IN_FLIGHT: "40",
      });
      // Slow enough that the doomed worker always has requests in flight when it is killed.
      const rx = await receiver(() => ({ status: 200, delayMs: 200 }));
      rx.secrets.push((await subscribe(s.api, { url: rx.url })).secret);
      const doomed = await workerProcess(s.env);
      await workerProcess(s.env);
      let killed = false;
      const eventIds = await publishBurst(s.api, 300, {
        onProgress: async () => {
          if (!killed && rx.received.length >= 60) {
            killed = true;
            doomed.kill("SIGKILL");
            await doomed.exited;
          }
        },
      });
      await waitFor(() => killed || rx.received.length >= 60, { what: "the kill" });
      if (!killed) {
        doomed.kill("SIGKILL");
        await doomed.exited;
      }
      expect(await doomed.exited).toBe("SIGKILL");
      expect((await countByStatus(s.database.url)).delivered ?? 0).toBeLessThan(300);
      const { unknown } = await expectAllDelivered(s, rx, eventIds, "cluster SIGKILL");
      // The killed worker had requests in flight: their attempts were closed with an unknown outcome.
      expect(unknown).toBeGreaterThan(0);
    },
  );

  it(
    "keeps max_in_flight and ORIGIN_MAX_IN_FLIGHT across two workers (the gate's keys on one slot)",
    HEAVY,
    async ({ setup, receiver, inProcessWorker }) => {
      const s = await setup({ WORKER_CONCURRENCY: "30", ORIGIN_MAX_IN_FLIGHT: "4" });
      const slow = () => ({ status: 200, delayMs: 50 });
      const capped = await receiver(slow);
      const shared = await receiver(slow);
      const create = async (url: string, maxInFlight?: number) => {
        const response = await s.api.call("POST", "/v1/subscriptions", {
          json: { url, events: ["*"], ...(maxInFlight ? { max_in_flight: maxInFlight } : {}) },
        });
        expect(response.status).toBe(201);
        return response.body.secret as string;
      };
      capped.secrets.push(await create(capped.url, 3));
      // Two subscriptions on one origin: the origin's cap makes them wait for each other, and the
      // release script then wakes the other subscription's line (keys it builds itself).
      shared.secrets.push(await create(shared.url), await create(shared.url));
      await inProcessWorker(s.env);
      await inProcessWorker(s.env);

      const eventIds = await publishBurst(s.api, 60, { concurrency: 10 });
      await waitFor(async () => (await countByStatus(s.database.url)).delivered === 180, {
        timeoutMs: 90_000,
        what: "180 deliveries delivered",
      });
      expect(capped.countsById().size).toBe(60);
      expect([...shared.countsById().values()].every((n) => n === 2)).toBe(true);
      expect(shared.countsById().size).toBe(60);
      expect([...capped.received, ...shared.received].every((webhook) => webhook.signatureValid)).toBe(true);
      expect(eventIds).toHaveLength(60);
      // At the cap, never beyond.
      expect(capped.maxConcurrent).toBe(3);
      expect(shared.maxConcurrent).toBe(4);
    },
  );
});

describe("start-up checks on a Redis Cluster", () => {
  it("connects to a private cluster with its own REDIS_URL, whatever database TEST_REDIS_URL names", () => {
    const env = testEnv("postgresql://postgres@127.0.0.1:5432/unused", { REDIS_CLUSTER_NODES: "127.0.0.1:7000" });
    expect(env.REDIS_URL).toBe(PRIVATE_CLUSTER_REDIS_URL);
    expect(loadConfig(env).redisClusterNodes).toEqual([{ host: "127.0.0.1", port: 7000 }]);
    // The shared Redis's URL may name a database, which a cluster would refuse.
    expect(() => loadConfig({ ...env, REDIS_URL: "redis://127.0.0.1:6379/3" })).toThrow(/database other than 0/);
  });

  it("checkRedis, waitUntilConnected and checkEvictionPolicy look at every master; a producer fails fast when it is gone", async ({
    defer,
  }) => {
    const cluster = await startPrivateRedisCluster(3);
    defer(() => cluster.stop());
    const target = {
      redisUrl: "redis://127.0.0.1:6379",
      redisClusterNodes: cluster.ports.map((port) => ({ host: "127.0.0.1", port })),
    };
    expect(await checkRedis(target)).toBeUndefined();
    // One seed is enough to find the others.
    expect(await checkRedis({ ...target, redisClusterNodes: target.redisClusterNodes.slice(1, 2) })).toBeUndefined();

    const producer = connectRedis(target, "producer");
    defer(async () => producer.disconnect());
    await waitUntilConnected(producer);
    expect(producer.status).toBe("ready");
    expect(await checkEvictionPolicy(producer)).toBeUndefined();
    // One master that may evict is enough to warn.
    const last = new Redis(cluster.ports[2]!, "127.0.0.1");
    defer(async () => last.disconnect());
    await last.config("SET", "maxmemory-policy", "allkeys-lru");
    expect(await checkEvictionPolicy(producer)).toBe("allkeys-lru");
    const queue = new DeliveryQueue(
      producer,
      queueLayoutFor({ queuePrefix: "startup", queueShards: SHARDS, redisClusterNodes: target.redisClusterNodes }),
    );
    await queue.enqueue(["dlv_a", "dlv_b", "dlv_c", "dlv_d"]);
    expect(await queue.withoutJob(["dlv_a", "dlv_b", "dlv_c", "dlv_d", "dlv_e"])).toEqual(["dlv_e"]);

    await cluster.stop();
    // The API's connection does not wait for a cluster that is gone (the event is in PostgreSQL).
    const started = Date.now();
    await expect(queue.enqueue(["dlv_f"])).rejects.toThrow();
    expect(Date.now() - started).toBeLessThan(5_000);
    await queue.close().catch(() => {});
    const message = await checkRedis(target);
    expect(message).toContain(`Cannot reach the Redis Cluster ${cluster.nodes}`);
    expect(message).toContain("REDIS_CLUSTER_NODES");
  });
});

describe("on a single Redis node with QUEUE_SHARDS=3", () => {
  it("spreads the jobs over three queues and delivers them all", async ({
    database,
    receiver,
    inProcessWorker,
    defer,
  }) => {
    const env = testEnv(database.url, {
      QUEUE_SHARDS: "3",
      RECONCILE_INTERVAL: "500ms",
      ADMIN_USERNAME: "admin",
      ADMIN_PASSWORD: "s3cret",
    });
    const api = await startTestApi(loadConfig(env));
    defer(() => api.close());
    const rx = await receiver();
    rx.secrets.push((await subscribe(api, { url: rx.url })).secret);

    // No worker yet: every job waits in its shard's queue.
    const eventIds = await publishBurst(api, 90);
    const ids = (await sql<{ id: string }>(database.url, "SELECT id FROM deliveries")).map((row) => row.id);
    expect(ids).toHaveLength(90);
    // In dispatch jobs, each in the queue of its deliveries' shard.
    const dispatched = await Promise.all(
      api.queue.queues.map(async (queue) =>
        (await queue.getJobs(["waiting"])).flatMap((job) =>
          (job.data as DispatchJob).deliveries.map((entry) => entry.deliveryId),
        ),
      ),
    );
    expect(dispatched.flat().sort()).toEqual([...ids].sort());
    for (const [shard, deliveryIds] of dispatched.entries())
      expect(deliveryIds.every((id) => shardOf(id, 3) === shard)).toBe(true);
    expect(await api.queue.withoutJob(ids)).toEqual([]);
    const waiting = await Promise.all(api.queue.queues.map((queue) => queue.getWaitingCount()));
    expect(waiting.every((count) => count > 0)).toBe(true);
    expect(api.queue.queues.map((queue) => queue.opts.prefix)).toEqual([
      `{${env.QUEUE_PREFIX}:0}`,
      `{${env.QUEUE_PREFIX}:1}`,
      `{${env.QUEUE_PREFIX}:2}`,
    ]);
    expect(await api.queue.depth()).toMatchObject({ waiting: waiting.reduce((a, b) => a + b, 0) });
    expect(await api.queue.dispatching()).toBe(90);
    // Bull Board lists each shard, with its jobs.
    const board = await api.call("GET", "/admin/queues/api/queues", {
      key: null,
      headers: { authorization: `Basic ${Buffer.from("admin:s3cret").toString("base64")}` },
    });
    expect(board.status).toBe(200);
    const listed = (board.body.queues as { name: string; displayName?: string; counts: { waiting: number } }[]).sort(
      (a, b) => a.name.localeCompare(b.name),
    );
    expect(listed.map((queue) => [queue.name, queue.displayName])).toEqual(
      [0, 1, 2].map((shard) => [`shard-${shard}-deliveries`, `deliveries (shard ${shard} of 3)`]),
    );
    expect(listed.map((queue) => queue.counts.waiting)).toEqual(waiting);

    await inProcessWorker(env);
    await waitFor(async () => (await countByStatus(database.url)).delivered === 90, {
      timeoutMs: 60_000,
      what: "90 deliveries delivered",
    });
    expect([...rx.countsById().keys()].sort()).toEqual([...eventIds].sort());
    expect(rx.received.every((webhook) => webhook.signatureValid)).toBe(true);
  });
});
