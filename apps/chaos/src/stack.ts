import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { applyMigrations } from "@webhooks/db";
import {
  ADMIN_DATABASE_URL,
  databaseUrl,
  freePort,
  type PrivateRedis,
  type ReceivedWebhook,
  type Reply,
  type ServiceProcess,
  spawnService,
  startPrivateRedis,
  startReceiver,
  startTcpProxy,
  type TcpProxy,
  type TestReceiver,
  withClient,
} from "@webhooks/testing";

export const API_KEY = `chaos_${randomBytes(24).toString("hex")}`;
export const EVENT_TYPE = "chaos.tick";

/**
 * The subscriptions every event goes to, each at a receiver of its own (its own origin):
 * healthy answers at once, slow after 200 ms, flaky fails the first attempt of every event with
 * a 500, and stalling hangs mid-body while its fault is on (and answers at once otherwise).
 */
export const ENDPOINTS = ["healthy", "slow", "flaky", "stalling"] as const;
export type Endpoint = (typeof ENDPOINTS)[number];

/** What the receivers accepted: for each endpoint, the event ids answered 2xx, with how often and when first. */
export class Deliveries {
  readonly byEndpoint = new Map<Endpoint, Map<string, { count: number; firstAt: number }>>(
    ENDPOINTS.map((endpoint) => [endpoint, new Map()]),
  );
  stalling = false;
  readonly #flakySeen = new Set<string>();

  reply(endpoint: Endpoint, webhook: ReceivedWebhook): Reply {
    if (webhook.signatureValid !== true) return { status: 400 };
    const id = String(webhook.headers["webhook-id"]);
    if (endpoint === "flaky" && !this.#flakySeen.has(id)) {
      this.#flakySeen.add(id);
      return { status: 500 };
    }
    const seen = this.byEndpoint.get(endpoint)!;
    const entry = seen.get(id);
    if (entry) entry.count++;
    else seen.set(id, { count: 1, firstAt: Date.now() });
    // A 2xx status is the receiver's word that it has the webhook (docs/receiving.md#answering), even if
    // the body of its answer then hangs: the worker must give up on the body and go on.
    if (endpoint === "stalling" && this.stalling) return { status: 200, stallBody: true };
    return endpoint === "slow" ? { status: 200, delayMs: 200 } : { status: 200 };
  }
}

export interface Stack {
  apiUrl: string;
  databaseUrl: string;
  redis: PrivateRedis;
  redisProxy: TcpProxy;
  postgresProxy: TcpProxy;
  deliveries: Deliveries;
  workers: ServiceProcess[];
  startApi(): Promise<void>;
  killApi(): Promise<void>;
  startWorker(): Promise<void>;
  killWorker(): Promise<void>;
  flushRedis(): void;
  /** Forgets the webhooks the receivers kept (their counts are in `deliveries`). */
  forgetReceived(): void;
  stop(): Promise<void>;
}

/** Stops `service` with SIGKILL, as a crash or the OOM killer would, and waits until it is gone. */
async function kill(service: ServiceProcess): Promise<void> {
  if (service.child.exitCode !== null || service.child.signalCode !== null) return;
  service.kill("SIGKILL");
  await service.exited;
}

/**
 * The service as chaos runs it: a database and a redis-server of its own, each behind a TCP proxy
 * that a fault can cut or silence, the API and `workers` workers as processes, and the receivers.
 */
export async function startStack(workerCount: number): Promise<Stack> {
  const name = `webhooks_chaos_${randomBytes(4).toString("hex")}`;
  await withClient(ADMIN_DATABASE_URL, (db) => db.query(`CREATE DATABASE ${name}`));
  const direct = databaseUrl(name);
  await applyMigrations(direct, { info: () => {}, warn: (message) => console.warn(message) });
  const postgresProxy = await startTcpProxy({
    host: new URL(direct).hostname,
    port: Number(new URL(direct).port || 5432),
  });
  const redis = await startPrivateRedis();
  const redisProxy = await startTcpProxy({ host: "127.0.0.1", port: redis.port });
  const proxied = new URL(direct);
  proxied.host = `127.0.0.1:${postgresProxy.port}`;
  const apiPort = await freePort();
  const env = {
    NODE_ENV: "development",
    LOG_LEVEL: "info",
    HOST: "127.0.0.1",
    PORT: String(apiPort),
    WORKER_METRICS_PORT: "0",
    API_KEYS: API_KEY,
    DATABASE_URL: proxied.toString(),
    REDIS_URL: `redis://127.0.0.1:${redisProxy.port}`,
    QUEUE_PREFIX: "chaos",
    DATABASE_QUERY_TIMEOUT: "3s",
    REDIS_SOCKET_TIMEOUT: "15s",
    DELIVERY_TIMEOUT: "10s",
    RETRY_SCHEDULE: "1s,2s,4s,8s,15s,30s,60s,120s,300s",
    RECONCILE_INTERVAL: "1s",
    JOB_LOCK_DURATION: "10s",
    SHUTDOWN_TIMEOUT: "5s",
    WORKER_CONCURRENCY: "100",
    ORIGIN_MAX_IN_FLIGHT: "500",
    CIRCUIT_FAILURE_THRESHOLD: "1000",
  };
  const deliveries = new Deliveries();
  const receivers = new Map<Endpoint, TestReceiver>();
  for (const endpoint of ENDPOINTS) {
    receivers.set(
      endpoint,
      await startReceiver((webhook) => deliveries.reply(endpoint, webhook), { verifyWith: "core" }),
    );
  }
  let api: ServiceProcess | undefined;
  const workers: ServiceProcess[] = [];
  const startingWorkers = new Set<Promise<void>>();
  let stopped = false;
  const stack: Stack = {
    apiUrl: `http://127.0.0.1:${apiPort}`,
    databaseUrl: direct,
    redis,
    redisProxy,
    postgresProxy,
    deliveries,
    workers,
    startApi: async () => {
      // A start-up check that times out on a busy machine stops the process: try again.
      for (let attempt = 1; ; attempt++) {
        try {
          api = await spawnService("api", env, { timeoutMs: 120_000 });
          return;
        } catch (error) {
          if (attempt === 3) throw error;
        }
      }
    },
    killApi: async () => {
      if (api) await kill(api);
    },
    startWorker: () => {
      const starting = spawnService("worker", env, { timeoutMs: 120_000 }).then(async (worker) => {
        if (stopped) await kill(worker);
        else workers.push(worker);
      });
      startingWorkers.add(starting);
      return starting.finally(() => startingWorkers.delete(starting));
    },
    killWorker: async () => {
      const worker = workers.shift();
      if (worker) await kill(worker);
    },
    flushRedis: () => {
      const result = spawnSync("redis-cli", ["-p", String(redis.port), "FLUSHALL"], { encoding: "utf8" });
      if (result.stdout.trim() !== "OK") throw new Error(`FLUSHALL failed: ${result.stdout}${result.stderr}`);
    },
    forgetReceived: () => {
      for (const receiver of receivers.values()) receiver.received.length = 0;
    },
    async stop() {
      stopped = true;
      await Promise.allSettled(startingWorkers);
      await Promise.all(workers.map(kill));
      if (api) await kill(api);
      for (const receiver of receivers.values()) await receiver.close();
      await redisProxy.close();
      await postgresProxy.close();
      await redis.stop();
      await withClient(ADMIN_DATABASE_URL, (db) => db.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
  try {
    await Promise.all([stack.startApi(), ...Array.from({ length: workerCount }, () => stack.startWorker())]);
    for (const endpoint of ENDPOINTS) await subscribe(stack, endpoint, receivers.get(endpoint)!);
  } catch (error) {
    await stack.stop();
    throw error;
  }
  return stack;
}

async function subscribe(stack: Stack, endpoint: Endpoint, receiver: TestReceiver): Promise<void> {
  const response = await fetch(`${stack.apiUrl}/v1/subscriptions`, {
    method: "POST",
    headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ url: `${receiver.url}/${endpoint}`, events: [EVENT_TYPE], max_in_flight: 200 }),
  });
  const body = (await response.json()) as { secret?: string };
  if (response.status !== 201 || !body.secret)
    throw new Error(`subscribing ${endpoint}: ${response.status} ${JSON.stringify(body)}`);
  receiver.useSecret(`/${endpoint}`, body.secret);
}
