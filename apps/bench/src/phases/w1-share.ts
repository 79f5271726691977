import { cpuMsPer } from "../harness/cpu.ts";
import { pct, round } from "../harness/stats.ts";
import { atScale, definePhase, table } from "../phase.ts";
import { type CeilingRun, measureCeiling } from "./ceiling.ts";
import { measureThroughput, THROUGHPUT, type ThroughputRun } from "./throughput.ts";

const ROUNDS = { full: 3, quick: 1 };
const TARGETS = { perSecond: 3_000, shareOfCeiling: 0.6 };
/** The API's ms of CPU per publish (one delivery each, in W1). */
const apiMs = (run: ThroughputRun) => cpuMsPer(run.cpu, run.delivered, ["api"]);

/**
 * W1 and the bare ceiling back to back, in rounds: a pair shares the shared host's moment, and the
 * median is not one slow minute's. Each round also runs W1 with a JSON Schema on every event type:
 * the API's CPU per publish tells what validation costs.
 */
export const w1SharePhase = definePhase({
  name: "w1",
  title: "W1 against the bare ceiling, back to back",
  summary: "W1 (each event to one subscription) and the bare ceiling in rounds; the median round's share",
  async run(context) {
    const setup = context.best.W1;
    const rounds: { w1: ThroughputRun; schemas: ThroughputRun; ceiling: CeilingRun; share: number }[] = [];
    for (let i = 0; i < atScale(context.scale, ROUNDS); i++) {
      const w1 = await measureThroughput(context, setup, "W1");
      const schemas = await measureThroughput(context, setup, "W1", true);
      const ceiling = await measureCeiling(context, setup, atScale(context.scale, THROUGHPUT).ceilingJobs);
      rounds.push({ w1, schemas, ceiling, share: w1.perSecond / ceiling.perSecond });
    }
    const sorted = [...rounds].sort((a, b) => a.share - b.share);
    return { ...setup, rounds, median: sorted[Math.floor(sorted.length / 2)]! };
  },
  report({ rounds, median, workers, concurrency }) {
    const { w1, ceiling } = median;
    return {
      tables: [
        table(
          `Rounds at ${workers} x ${concurrency} (W1's best setup)`,
          rounds.map((r, i) => ({
            round: `${i + 1}${r === median ? " (median)" : ""}`,
            "W1 deliveries/s": `${round(r.w1.perSecond)}${r.w1.timedOut ? " (timed out)" : ""}`,
            "bare ceiling jobs/s": `${round(r.ceiling.perSecond)}${r.ceiling.timedOut ? " (timed out)" : ""}`,
            share: pct(r.share),
            "with schemas: deliveries/s, API ms of CPU per publish (without)": `${round(r.schemas.perSecond)}, ${apiMs(r.schemas).toFixed(3)} (${apiMs(r.w1).toFixed(3)})`,
            "ms of CPU per delivery / per job, all but the bench": `${cpuMsPer(r.w1.cpu, r.w1.delivered).toFixed(2)} / ${cpuMsPer(r.ceiling.cpu, r.ceiling.jobs).toFixed(2)}`,
          })),
        ),
      ],
      checks: [
        {
          figure: "W1 deliveries/s against the bare ceiling run right after it (median round)",
          measured: `${round(w1.perSecond)}/s = ${pct(median.share)} of ${round(ceiling.perSecond)}/s (rounds: ${rounds.map((r) => pct(r.share)).join(", ")})`,
          target: `>= ${round(TARGETS.perSecond)}/s, or >= ${pct(TARGETS.shareOfCeiling)} of the ceiling`,
          met:
            !w1.timedOut &&
            !ceiling.timedOut &&
            (w1.perSecond >= TARGETS.perSecond || median.share >= TARGETS.shareOfCeiling),
        },
      ],
    };
  },
});
