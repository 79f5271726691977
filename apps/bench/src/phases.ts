import type { Phase } from "./phase.ts";
import { backlogPhase } from "./phases/backlog.ts";
import { fanOutPhase } from "./phases/fanout.ts";
import { listPhase } from "./phases/list.ts";
import { lonePhase } from "./phases/lone.ts";
import { noisyPhase } from "./phases/noisy.ts";
import { originPhase } from "./phases/origin.ts";
import { retentionPhase } from "./phases/retention.ts";
import { statsPhase } from "./phases/stats.ts";
import { throughputPhase } from "./phases/throughput.ts";
import { w1SharePhase } from "./phases/w1-share.ts";

/** Every phase, in the order of a full run: throughput finds the worker setups later ones use; those at scale come last. */
export const PHASES: Phase[] = [
  throughputPhase,
  w1SharePhase,
  lonePhase,
  listPhase,
  noisyPhase,
  fanOutPhase,
  originPhase,
  backlogPhase,
  retentionPhase,
  statsPhase,
];
