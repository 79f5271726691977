import type { Phase, Table } from "./phase.ts";

/** A phase's report as the renderer gets it; a phase that threw has its error instead of tables. */
export interface RenderedPhase extends ReturnType<Phase["report"]> {
  title: string;
  error?: string;
}

/**
 * The whole report, as Markdown: where it ran, every check against its target, then each phase's
 * tables. BENCHMARKS.md's Results section is the report of a full run.
 */
export function renderReport(heading: string, phases: RenderedPhase[]): string {
  return `${["## Results", heading, renderChecks(phases), ...phases.map(renderPhase)].join("\n\n")}\n`;
}

/** One table of every check; a phase that failed counts as a check missed. */
export function renderChecks(phases: RenderedPhase[]): string {
  const rows = phases.flatMap((phase) => [
    ...phase.checks.map((c) => [phase.title, c.figure, c.measured, c.target, c.met ? "yes" : "**no**"]),
    ...(phase.error ? [[phase.title, "the phase ran to its end", `failed: ${phase.error}`, "yes", "**no**"]] : []),
  ]);
  return renderTable({ title: "Targets", columns: ["phase", "figure", "measured", "target", "met"], rows });
}

export function renderPhase(phase: RenderedPhase): string {
  return [`### ${phase.title}`, ...phase.tables.map(renderTable)].join("\n\n");
}

/** A Markdown table under a bold title, its columns padded so that it also reads as plain text. */
export function renderTable(table: Table): string {
  const clean = (text: string) => text.replace(/\|/g, "\\|").replace(/\n/g, " ");
  const rows = [table.columns, ...table.rows].map((row) => table.columns.map((_, i) => clean(row[i] ?? "")));
  const widths = table.columns.map((_, i) => Math.max(3, ...rows.map((row) => row[i]!.length)));
  const line = (row: string[]) => `| ${row.map((text, i) => text.padEnd(widths[i]!)).join(" | ")} |`;
  const [header, ...body] = rows;
  const rule = line(widths.map((width) => "-".repeat(width)));
  return [`**${table.title}**`, "", line(header!), rule, ...body.map(line)].join("\n");
}
