import { join } from "node:path";
import type { TestReceiver } from "@webhooks/testing";
import { onCleanup } from "../cleanup.ts";
import { databaseUrl } from "../databases.ts";
import { measureThroughput, type ThroughputResult, type WorkerSetup, type Workload } from "../phases/throughput.ts";
import { DATABASES, settings } from "../settings.ts";
import {
  PERF_NODE_FLAGS,
  type PostgresBreakdown,
  perfAvailable,
  postgresBreakdown,
  removePerfMaps,
  startMachineRecording,
  threadProfile,
} from "./perf.ts";
import { cpuProfileArgs, mainProfileIn, type ProfileSummary, profileDirectory, summarizeProfile } from "./profile.ts";
import { measureQueryOverhead, type QueryOverhead } from "./query-overhead.ts";

export interface Profiles {
  /** perf: sampled by Linux perf while on a CPU; v8: node --cpu-prof (when perf is unavailable). */
  method: "perf" | "v8";
  run: ThroughputResult;
  api: ProfileSummary | undefined;
  worker: ProfileSummary | undefined;
  postgres: PostgresBreakdown | undefined;
  /** Share of each main thread's samples in the kernel (perf only). */
  kernelShare: { api: number | undefined; worker: number | undefined };
  queryOverhead: QueryOverhead;
}

/**
 * Where the time goes: a shorter run of phase 1 with the API and the first worker profiled. With
 * Linux perf, the whole machine is recorded over the measured window (the node processes name
 * their JS frames for it), which also breaks PostgreSQL's time down; without it, the two node
 * processes run under `node --cpu-prof`. Its throughput is not a result: profiling costs CPU.
 */
export async function profileThroughput(
  receiver: TestReceiver,
  setup: WorkerSetup,
  workload: Workload = "W10",
): Promise<Profiles> {
  const dir = profileDirectory();
  const withPerf = perfAvailable();
  const nodeArgs = withPerf
    ? { api: PERF_NODE_FLAGS, worker: (index: number) => (index === 0 ? PERF_NODE_FLAGS : []) }
    : {
        api: cpuProfileArgs(join(dir, "api")),
        worker: (index: number) => (index === 0 ? cpuProfileArgs(join(dir, "worker")) : []),
      };

  let recording: ReturnType<typeof startMachineRecording> | undefined;
  let perfTimer: NodeJS.Timeout | undefined;
  let perfFile: string | undefined;
  const run = await measureThroughput(receiver, setup, {
    workload,
    deliveries: settings.profile.events * settings.throughput.subscriptions,
    timeoutMs: settings.profile.timeoutMs,
    nodeArgs,
    onStarted: (pids) => {
      if (withPerf) onCleanup("remove perf maps", async () => removePerfMaps([pids.api, ...pids.workers]));
    },
    onMeasuring: () => {
      // From a moment after the first publish: the first requests and jobs still load modules lazily.
      if (withPerf)
        perfTimer = setTimeout(
          () => (recording = startMachineRecording(join(dir, "perf.data"))),
          settings.profile.perfDelayMs,
        );
    },
    onMeasured: async () => {
      clearTimeout(perfTimer);
      perfFile = await recording?.stop();
    },
  });

  // The profiled run's database is still there (it is dropped at the end of the benchmark).
  const queryOverhead = await measureQueryOverhead(databaseUrl(DATABASES.main));
  if (withPerf) {
    const api = perfFile ? threadProfile(perfFile, run.pids.api) : undefined;
    const worker =
      perfFile && run.pids.workers[0] !== undefined ? threadProfile(perfFile, run.pids.workers[0]) : undefined;
    return {
      method: "perf",
      run,
      api,
      worker,
      postgres: perfFile ? postgresBreakdown(perfFile) : undefined,
      kernelShare: { api: api?.kernelShare, worker: worker?.kernelShare },
      queryOverhead,
    };
  }
  const summary = (name: string) => {
    const profile = mainProfileIn(join(dir, name));
    return profile ? summarizeProfile(profile, run.windowUs) : undefined;
  };
  return {
    method: "v8",
    run,
    api: summary("api"),
    worker: summary("worker"),
    postgres: undefined,
    kernelShare: { api: undefined, worker: undefined },
    queryOverhead,
  };
}
