import { freePort } from "@webhooks/testing";
import { ROOT, type Service, serviceEnv, startProcess } from "./services.ts";

export interface WatchedWorker extends Service {
  /** Sums the samples of a counter on the worker's /metrics, optionally only those with a label value. */
  counter(name: string, label?: { name: string; value: string }): Promise<number>;
}

/**
 * A worker process started as services.ts starts one, on a metrics port we know, so that the
 * phases that watch its reconciler or its pruner can read their counters.
 */
export async function startWatchedWorker(
  name: string,
  databaseUrl: string,
  queuePrefix: string,
  extra: Record<string, string>,
): Promise<WatchedWorker> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env = serviceEnv(databaseUrl, queuePrefix, { ...extra, WORKER_METRICS_PORT: String(port) });
  const service = await startProcess(name, `${ROOT}apps/worker/src/main.ts`, env, `${base}/healthz`);
  return {
    ...service,
    async counter(metric, label) {
      const response = await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(5_000) });
      const text = await response.text();
      let sum = 0;
      for (const line of text.split("\n")) {
        const match = /^(\w+)(\{[^}]*\})? (\S+)$/.exec(line);
        if (!match || match[1] !== metric) continue;
        if (label && !match[2]?.includes(`${label.name}="${label.value}"`)) continue;
        sum += Number(match[3]);
      }
      return sum;
    },
  };
}
