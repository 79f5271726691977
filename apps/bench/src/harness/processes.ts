import { spawn } from "node:child_process";
import { dirname } from "node:path";
import { freePort } from "@webhooks/testing";
import { onCleanup } from "./cleanup.ts";
import { BENCH_API_KEY, REDIS_URL, ROOT } from "./config.ts";
import { waitUntil } from "./time.ts";

/** A child process; `processGroup` is its pid, `baseUrl` the API's or the worker's metrics server's. */
export type Service = { name: string; processGroup: number; baseUrl: string; stop(): Promise<void> };

export function serviceEnv(databaseUrl: string, queuePrefix: string, extra: Record<string, string>) {
  const env = { NODE_ENV: "development", LOG_LEVEL: "warn", HOST: "127.0.0.1", REDIS_URL, API_KEYS: BENCH_API_KEY };
  return { ...env, DATABASE_URL: databaseUrl, QUEUE_PREFIX: queuePrefix, ...extra };
}

/**
 * Starts `script` the way production starts it (`node --import tsx src/main.ts` from its app's
 * directory), in a process group of its own, so that stop() reaches everything it runs and a
 * Ctrl-C in the terminal reaches only us; ready once `${baseUrl}/healthz` answers. The services
 * run with LOG_LEVEL=warn, so that per-request log lines do not cost CPU the bench measures.
 */
export async function startProcess(
  name: string,
  script: string,
  env: Record<string, string>,
  baseUrl: string,
  nodeArgs: string[] = [],
): Promise<Service> {
  const child = spawn(process.execPath, [...nodeArgs, "--import", "tsx", script], {
    cwd: dirname(dirname(script)),
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let [output, exited] = ["", false];
  for (const stream of [child.stdout, child.stderr])
    stream.on("data", (chunk) => (output = (output + chunk).slice(-20_000)));
  child.once("exit", () => (exited = true));
  const pid = child.pid;
  if (pid === undefined) throw new Error(`${name}: could not spawn ${script}`);
  const signal = (signal: NodeJS.Signals) => {
    try {
      process.kill(-pid, signal);
    } catch {
      // Already gone.
    }
  };
  const stop = onCleanup(`stop ${name}`, async () => {
    signal("SIGTERM");
    if (!(await waitUntil(() => exited, 15_000, 50))) console.error(`${name} did not stop within 15 s; killing it`);
    signal("SIGKILL"); // also after a graceful exit: nothing of the group may outlive the bench
    // The services log at warn level: anything they printed is worth a look.
    const lines = output.split("\n").filter((line) => line.trim() !== "");
    if (lines.length > 0) console.log(`    ${name} printed ${lines.length} line(s), e.g.: ${lines[0]!.slice(0, 300)}`);
  });
  const healthy = () =>
    fetch(`${baseUrl}/healthz`, { signal: AbortSignal.timeout(1_000) }).then(
      (r) => r.ok,
      () => false,
    );
  if (!(await waitUntil(async () => exited || (await healthy()), 60_000, 100)) || exited) {
    await stop();
    throw new Error(`${name} ${exited ? "exited" : "was not ready within 60 s"}:\n${output}`);
  }
  return { name, processGroup: pid, baseUrl, stop };
}

/** The API (`kind` "api") or a worker, on `databaseUrl` and the queues under `queuePrefix`. */
export async function startService(
  kind: "api" | "worker",
  name: string,
  databaseUrl: string,
  queuePrefix: string,
  options: { env?: Record<string, string>; nodeArgs?: string[] } = {},
): Promise<Service> {
  const port = String(await freePort());
  const env = serviceEnv(databaseUrl, queuePrefix, {
    ...options.env,
    [kind === "api" ? "PORT" : "WORKER_METRICS_PORT"]: port,
  });
  return startProcess(name, `${ROOT}apps/${kind}/src/main.ts`, env, `http://127.0.0.1:${port}`, options.nodeArgs);
}
