import { type ChildProcess, spawn } from "node:child_process";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "@webhooks/testing";
import { onCleanup } from "./cleanup.ts";
import { BENCH_API_KEY, REDIS_URL } from "./settings.ts";

export const ROOT = fileURLToPath(new URL("../../../", import.meta.url));

/**
 * A child process started the way production starts it. Unlike packages/testing's spawnService,
 * which waits for an info-level log line, readiness is polled over HTTP: the services run with
 * LOG_LEVEL=warn here, so that per-request log lines do not cost CPU the benchmark is measuring,
 * and they print nothing when they are ready.
 */
export interface Service {
  name: string;
  pid: number;
  /** Its own process group (the same number as its pid). */
  processGroup: number;
  output(): string;
  stop(): Promise<void>;
}

export function serviceEnv(
  databaseUrl: string,
  queuePrefix: string,
  extra: Record<string, string>,
): Record<string, string> {
  return {
    NODE_ENV: "development",
    LOG_LEVEL: "warn",
    HOST: "127.0.0.1",
    DATABASE_URL: databaseUrl,
    REDIS_URL,
    QUEUE_PREFIX: queuePrefix,
    API_KEYS: BENCH_API_KEY,
    ...extra,
  };
}

export async function startProcess(
  name: string,
  script: string,
  env: Record<string, string>,
  healthUrl: string,
  options: { timeoutMs?: number; nodeArgs?: string[] } = {},
): Promise<Service> {
  // As production starts the apps (their `npm start`: node --import tsx src/main.ts, from the
  // app's directory), with profiling flags in front when asked.
  // detached: its own process group, so that stop() reaches everything it runs, and a Ctrl-C in
  // the terminal reaches only us: we stop the children ourselves, in order.
  const child: ChildProcess = spawn(process.execPath, [...(options.nodeArgs ?? []), "--import", "tsx", script], {
    cwd: dirname(dirname(script)),
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let output = "";
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-20_000);
  };
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let hasExited = false;
  void exited.then(() => (hasExited = true));
  const pid = child.pid;
  if (pid === undefined) throw new Error(`${name}: could not spawn ${script}`);

  const signalGroup = (signal: NodeJS.Signals) => {
    try {
      process.kill(-pid, signal);
    } catch {
      // Already gone.
    }
  };
  const stop = onCleanup(`stop ${name}`, async () => {
    signalGroup("SIGTERM");
    let timer: NodeJS.Timeout | undefined;
    const graceful = await Promise.race([
      exited.then(() => true),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), 15_000))),
    ]);
    clearTimeout(timer);
    if (!graceful) console.error(`${name} did not stop within 15 s; killing it`);
    // Also after a graceful exit: nothing of the group may outlive the benchmark.
    signalGroup("SIGKILL");
  });

  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  for (;;) {
    if (hasExited) {
      await stop();
      throw new Error(`${name} exited before it was ready:\n${output}`);
    }
    try {
      const response = await fetch(healthUrl, { signal: AbortSignal.timeout(1_000) });
      if (response.ok) break;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`${name} was not ready within ${options.timeoutMs ?? 60_000} ms:\n${output}`);
    }
    await sleep(100);
  }
  return { name, pid, processGroup: pid, output: () => output, stop };
}

export interface Api extends Service {
  baseUrl: string;
}

/**
 * `root` is the checkout whose services run: this one, or another one that `--baseline` names (its
 * dependencies installed), to measure two versions of the code on the same machine.
 */
export async function startApi(
  databaseUrl: string,
  queuePrefix: string,
  extra: Record<string, string> = {},
  nodeArgs?: string[],
  root: string = ROOT,
): Promise<Api> {
  const port = await freePort();
  const env = serviceEnv(databaseUrl, queuePrefix, { PORT: String(port), ...extra });
  const baseUrl = `http://127.0.0.1:${port}`;
  const service = await startProcess(
    "api",
    `${root}apps/api/src/main.ts`,
    env,
    `${baseUrl}/healthz`,
    nodeArgs ? { nodeArgs } : {},
  );
  return { ...service, baseUrl };
}

export async function startWorker(
  name: string,
  databaseUrl: string,
  queuePrefix: string,
  extra: Record<string, string>,
  nodeArgs?: string[],
  root: string = ROOT,
): Promise<Service> {
  const port = await freePort();
  const env = serviceEnv(databaseUrl, queuePrefix, { WORKER_METRICS_PORT: String(port), ...extra });
  return startProcess(
    name,
    `${root}apps/worker/src/main.ts`,
    env,
    `http://127.0.0.1:${port}/healthz`,
    nodeArgs ? { nodeArgs } : {},
  );
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
