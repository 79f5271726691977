import type { TestReceiver } from "@webhooks/testing";
import { settings } from "../settings.ts";
import { type CeilingResult, measureCeiling } from "./ceiling.ts";
import { measureThroughput, publishersFor, type ThroughputResult, type WorkerSetup } from "./throughput.ts";

export interface W1ShareRound {
  /** Not the verdict's: W1 with as many requests in flight as W10's publishers make (16, not 160). */
  w1FewPublishers: ThroughputResult;
  w1: ThroughputResult;
  ceiling: CeilingResult;
  /** W1's deliveries/s over the ceiling's jobs/s, measured back to back. */
  share: number;
  shareFewPublishers: number;
}

export interface W1ShareResult extends WorkerSetup {
  rounds: W1ShareRound[];
  /** The round of the median share: the one the W1 verdict reads. */
  median: W1ShareRound;
}

/**
 * Phase 4b: W1 against the bare ceiling, in rounds of one W1 run followed at once by one ceiling
 * run. The hosts this runs on change speed within minutes: on one, in one hour, the ceiling ran
 * at 1,298 to 2,179 jobs/s, and the same code's W1 at 49% to 64% of it. A W1 run and a ceiling
 * run minutes apart compare the host's moments as much as the code; a pair back to back shares
 * its moment, and the median of several pairs is not decided by one slow minute.
 *
 * Each round first runs W1 with W10's 16 publishers as well (not the verdict's: see
 * settings.throughput.deliveriesInFlight), to show what the offered load does to W1.
 */
export async function measureW1Share(receiver: TestReceiver, setup: WorkerSetup): Promise<W1ShareResult> {
  const rounds: W1ShareRound[] = [];
  for (let round = 1; round <= settings.w1Share.rounds; round++) {
    const w1FewPublishers = await measureThroughput(receiver, setup, {
      workload: "W1",
      publishers: publishersFor("W10"),
    });
    const w1 = await measureThroughput(receiver, setup, { workload: "W1" });
    const ceiling = await measureCeiling(receiver, setup);
    const share = w1.perSecond / ceiling.perSecond;
    const shareFewPublishers = w1FewPublishers.perSecond / ceiling.perSecond;
    console.log(
      `  round ${round}: W1 ${Math.round(w1.perSecond)}/s, bare ceiling ${Math.round(ceiling.perSecond)}/s = ${(share * 100).toFixed(0)}% ` +
        `(with ${w1FewPublishers.publishers} publishers: ${Math.round(w1FewPublishers.perSecond)}/s = ${(shareFewPublishers * 100).toFixed(0)}%)`,
    );
    rounds.push({ w1FewPublishers, w1, ceiling, share, shareFewPublishers });
  }
  const byShare = [...rounds].sort((a, b) => a.share - b.share);
  return { ...setup, rounds, median: byShare[Math.floor(byShare.length / 2)]! };
}
