import { availableParallelism, cpus, loadavg, release, totalmem } from "node:os";
import { ANSWER_KINDS } from "./load.ts";
import type { FaultResult } from "./run-fault.ts";

// An event can reach its receiver before its 202 reaches the client: shown as 0, not below.
const seconds = (ms: number | undefined) => (ms === undefined ? "–" : `${(Math.max(0, ms) / 1000).toFixed(1)} s`);

/** The results as a Markdown table, a row per fault (and round). */
export function resultTable(results: FaultResult[]): string {
  const header = [
    "Fault",
    "Accepted",
    "Deliveries",
    "Delivered",
    "Lost",
    "Duplicates",
    ...ANSWER_KINDS.map((kind) => `During: ${kind}`),
    "Not accepted",
    "Recovered in",
    "Result",
  ];
  const rows = results.map((result) => [
    `\`${result.fault.name}\``,
    String(result.accepted),
    String(result.expected),
    String(result.delivered),
    String(result.lost),
    String(result.duplicated),
    ...ANSWER_KINDS.map((kind) => String(result.during.get(kind) ?? 0)),
    String(result.notAccepted),
    seconds(result.recoveredInMs),
    result.passed ? "pass" : "**FAIL**",
  ]);
  // Padded as the formatter (Biome) lays Markdown tables out, so that CHAOS.md is written formatted.
  const widths = header.map((_, i) => Math.max(...[header, ...rows].map((cells) => cells[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((cell, i) => cell.padEnd(widths[i]!)).join(" | ")} |`;
  return [line(header), line(widths.map((width) => "-".repeat(width))), ...rows.map(line)].join("\n");
}

/** What each failure or duplicate was, from the delivery log. */
export function resultDetails(results: FaultResult[]): string {
  const lines: string[] = [];
  for (const result of results) {
    for (const line of result.duplicates) lines.push(`- \`${result.fault.name}\` duplicate: ${line}`);
    for (const line of result.lostDetails) lines.push(`- \`${result.fault.name}\` **lost**: ${line}`);
    for (const [answer, count] of result.oddAnswers)
      lines.push(`- \`${result.fault.name}\` **unexpected answer** ×${count}: ${answer}`);
    if (result.failedAnswers > 0 && result.oddAnswers.size === 0)
      lines.push(`- \`${result.fault.name}\` **${result.failedAnswers} publish(es) got no answer**`);
  }
  return lines.join("\n");
}

/** The machine, in one line, with its load (the run shares it with whatever else runs). */
export function describeMachine(): string {
  const load = loadavg()
    .map((value) => value.toFixed(1))
    .join(", ");
  return `${availableParallelism()} cores (${cpus()[0]?.model.trim()}), ${Math.round(totalmem() / 2 ** 30)} GB, Linux ${release()}, Node ${process.versions.node}; load average ${load}`;
}
