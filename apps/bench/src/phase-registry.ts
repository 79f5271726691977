import type { TestReceiver } from "@webhooks/testing";
import type { Machine } from "./machine.ts";
import { measureBacklog } from "./phases/backlog.ts";
import { measureCeiling } from "./phases/ceiling.ts";
import { fanOutVerdicts, measureFanOut } from "./phases/fanout.ts";
import { compareWithBaseline } from "./phases/isolation-cost.ts";
import { measureListLatency } from "./phases/list-latency.ts";
import { measureNoisyNeighbour } from "./phases/noisy-neighbour.ts";
import { measureRetention } from "./phases/retention-load.ts";
import { measureThroughput } from "./phases/throughput.ts";
import { measureW1Share } from "./phases/w1-share.ts";
import { type Profiles, profileThroughput } from "./profiling/profiling.ts";
import {
  cpuPerItemText,
  hottestTable,
  layersTable,
  noisySection,
  noisyVerdicts,
  postgresStagesTable,
  printVerdicts,
  w1ShareSection,
  w1Verdict,
} from "./report.ts";
import { backlogSection, backlogVerdicts, retentionSection, retentionVerdicts } from "./report-scale.ts";

export interface RunContext {
  receiver: TestReceiver;
  host: Machine;
  profile: boolean;
  /** A checkout of the code from before endpoint isolation, to compare with (`--baseline`). */
  baseline?: string | undefined;
}

/** A phase that runs alone (`--only <name>`), for development: it prints its figures; BENCHMARKS.md is left as it is. */
interface AlonePhase {
  title: string;
  /** Whether it uses the benchmark's fixed databases (DATABASES), which the harness drops before it runs. */
  usesFixedDatabases: boolean;
  run(context: RunContext): Promise<void>;
}

export const ALONE_PHASES = {
  noisy: {
    title: "5. noisy neighbour",
    usesFixedDatabases: true,
    async run({ receiver }) {
      const noisy = await measureNoisyNeighbour(receiver);
      console.log(`\n${noisySection(noisy).join("\n\n")}\n`);
      printVerdicts(noisyVerdicts(noisy));
    },
  },
  throughput: {
    title: "1. end-to-end throughput",
    usesFixedDatabases: true,
    async run({ receiver, profile, baseline }) {
      const setup = { workers: 1, concurrency: 100 };
      if (baseline !== undefined) return compareWithBaseline(receiver, baseline, setup);
      // W1 is the headline, and its API does per request what W10's does per ten deliveries.
      if (profile) printProfiles(await profileThroughput(receiver, setup, "W1"));
      const w10 = await measureThroughput(receiver, setup, { workload: "W10" });
      const w1 = await measureThroughput(receiver, setup, { workload: "W1" });
      const ceiling = await measureCeiling(receiver, setup);
      console.log(
        `  W10 ${Math.round(w10.perSecond)}/s, W1 ${Math.round(w1.perSecond)}/s, bare ceiling ${Math.round(ceiling.perSecond)}/s`,
      );
      // CPU per delivery compares across runs on a machine whose speed varies; rates alone do not.
      console.log(`  CPU ms per delivery, W10: ${cpuPerItemText(w10.cpu, w10.deliveries)}`);
      console.log(`  CPU ms per delivery, W1: ${cpuPerItemText(w1.cpu, w1.deliveries)}`);
      console.log(`  CPU ms per job, bare ceiling: ${cpuPerItemText(ceiling.cpu, ceiling.jobs)}`);
    },
  },
  w1: {
    title: "4b. W1 against the bare ceiling, back to back",
    usesFixedDatabases: true,
    async run({ receiver }) {
      const w1Share = await measureW1Share(receiver, { workers: 1, concurrency: 100 });
      console.log(`\n${w1ShareSection(w1Share).join("\n\n")}\n`);
      printVerdicts([w1Verdict(w1Share)]);
    },
  },
  list: {
    title: "3. list latency on 1M rows",
    usesFixedDatabases: true,
    async run({ profile }) {
      await measureListLatency({ profile });
    },
  },
  backlog: {
    title: "6. a backlog of 1,000,000 queued deliveries",
    // Phases 6 and 8 use databases named per run: they must not end another benchmark's run on this server that uses the fixed ones.
    usesFixedDatabases: false,
    async run({ receiver }) {
      const backlog = await measureBacklog(receiver, { workers: 1, concurrency: 100 });
      console.log(`\n${backlogSection(backlog).join("\n\n")}\n`);
      printVerdicts(backlogVerdicts(backlog));
    },
  },
  fanout: {
    title: "7. fan-out: one event to 10,000 subscriptions",
    usesFixedDatabases: true,
    async run({ receiver }) {
      printVerdicts(fanOutVerdicts(await measureFanOut(receiver, { workers: 1, concurrency: 100 })));
    },
  },
  retention: {
    title: "8. retention: publish and list latency on 10,000,000 deliveries, without and with a pruning pass",
    usesFixedDatabases: false,
    async run({ receiver }) {
      const retention = await measureRetention(receiver);
      console.log(`\n${retentionSection(retention).join("\n\n")}\n`);
      printVerdicts(retentionVerdicts(retention));
    },
  },
} satisfies Record<string, AlonePhase>;

export type AlonePhaseName = keyof typeof ALONE_PHASES;

export function isAlonePhase(name: string): name is AlonePhaseName {
  return Object.hasOwn(ALONE_PHASES, name);
}

function printProfiles(profiles: Profiles): void {
  console.log(
    `  profiled W1 run (${profiles.method}; its rate is not a result): ${Math.round(profiles.run.perSecond)}/s`,
  );
  for (const [name, summary] of [
    ["API", profiles.api],
    ["worker", profiles.worker],
  ] as const) {
    console.log(`\n  ${name}\n\n${layersTable(summary)}\n\n${hottestTable(summary, profiles.method, 25)}`);
  }
  const pg = profiles.postgres;
  if (pg)
    console.log(
      `\n  PostgreSQL (its backends: ${(pg.backendShareOfMachine * 100).toFixed(1)}% of the machine's samples)\n\n${postgresStagesTable(pg)}`,
    );
}
