import { mkdirSync } from "node:fs";
import { startOtlpSink } from "@webhooks/testing";
import type { Context, WorkerSetup } from "../phase.ts";
import { ApiClient } from "./api-client.ts";
import { ROOT, RUN_PREFIX } from "./config.ts";
import { groupTarget, sharedTargets, startCpuWindow } from "./cpu.ts";
import { freshDatabase } from "./databases.ts";
import type { Endpoint } from "./endpoint.ts";
import { type Service, startService } from "./processes.ts";

export type Stack = Awaited<ReturnType<typeof startStack>>;
let stacks = 0;

/**
 * The service as a phase measures it: the API and `workers` workers on a fresh database named
 * after `label`, with a client that keeps at most `connections` requests in flight, delivering
 * to `endpoint` (by default the shared receiver). With `--profile`, each process runs under
 * `node --cpu-prof`, its profile in artifacts/profiles/.
 */
export async function startStack(
  context: Context,
  label: string,
  options: { workers?: number; workerEnv?: Record<string, string>; connections?: number; endpoint?: Endpoint } = {},
) {
  const database = await freshDatabase(label);
  const prefix = `${RUN_PREFIX}-${label}-${++stacks}`;
  const nodeArgs = (name: string) => {
    if (!context.profile) return [];
    const dir = `${ROOT}artifacts/profiles/${prefix}-${name}`;
    mkdirSync(dir, { recursive: true });
    return ["--cpu-prof", `--cpu-prof-dir=${dir}`];
  };
  // --tracing: every process exports its spans to a collector stand-in that only counts.
  const sink = context.tracing ? await startOtlpSink({ record: false }) : undefined;
  const otel: Record<string, string> = sink ? { OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint } : {};
  const api = await startService("api", "api", database.url, prefix, { env: otel, nodeArgs: nodeArgs("api") });
  const workers: Service[] = [];
  const client = new ApiClient(api.baseUrl, options.connections ?? 16);
  const endpoint = options.endpoint ?? { receiver: context.receiver, subscription: {}, workerEnv: {} };
  const { receiver, subscription: credentials } = endpoint;
  const stack = {
    database,
    prefix, // of every Redis key of the stack
    client,
    receiver,
    /** Subscribes `${receiver.url}${path}`, with the endpoint's credentials, and gives the receiver its secret. */
    async subscribe(path: string, types: string[], settings = {}): Promise<void> {
      const created = await client.createSubscription(`${receiver.url}${path}`, types, { ...credentials, ...settings });
      receiver.useSecret(path, created.secret);
    },
    /** One more worker, stopped with the stack. */
    async addWorker(name: string, env: Record<string, string> = {}): Promise<Service> {
      const service = { env: { ...otel, ...endpoint.workerEnv, ...env }, nodeArgs: nodeArgs(name) };
      const worker = await startService("worker", name, database.url, prefix, service);
      workers.push(worker);
      const stop = async () => {
        await worker.stop();
        // Stopped, it leaves the CPU windows opened after.
        if (workers.includes(worker)) workers.splice(workers.indexOf(worker), 1);
      };
      return { ...worker, stop };
    },
    /** A CPU window over the API, the workers (also those started while it is open), PostgreSQL (this database), Redis and the bench. */
    cpuWindow: () =>
      startCpuWindow(() => [
        groupTarget("api", api.processGroup),
        ...workers.map((worker) => groupTarget(worker.name, worker.processGroup)),
        ...sharedTargets(database.name),
      ]),
    async stop(): Promise<void> {
      await client.close();
      // Workers first, so that none is mid-attempt when the API and the database go away.
      await Promise.all(workers.map((worker) => worker.stop()));
      await api.stop();
      await sink?.close();
    },
  };
  try {
    for (let i = 1; i <= (options.workers ?? 1); i++) await stack.addWorker(`worker-${i}`, options.workerEnv);
  } catch (error) {
    await stack.stop();
    throw error;
  }
  return stack;
}

/**
 * A worker's settings for the pipeline phases. Their one loopback receiver stands in for many
 * customers' hosts, so ORIGIN_MAX_IN_FLIGHT (the origin phase's subject) is put out of reach.
 */
export const pipelineWorkerEnv = ({ workers, concurrency }: WorkerSetup): Record<string, string> => ({
  WORKER_CONCURRENCY: String(concurrency),
  ORIGIN_MAX_IN_FLIGHT: String(2 * concurrency * workers),
});

/** As a customer sending hundreds of webhooks a second to one endpoint would set max_in_flight. */
export const pipelineSubscription = ({ workers, concurrency }: WorkerSetup) => ({
  max_in_flight: Math.min(1_000, concurrency * workers),
});
