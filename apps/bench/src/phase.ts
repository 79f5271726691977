import type { TestReceiver } from "@webhooks/testing";
import type { EndpointAuth } from "./harness/endpoint.ts";

/** `full` is the published run; `quick` the same measurements at a small size, to check a phase works. */
export type Scale = "full" | "quick";

/** Worker processes x WORKER_CONCURRENCY. */
export type WorkerSetup = { workers: number; concurrency: number };

/** What every phase gets. A phase may leave findings for later ones (`best`). */
export interface Context {
  scale: Scale;
  /** --profile and --tracing (harness/stack.ts); --endpoint-auth and --egress-proxy (harness/endpoint.ts). */
  profile: boolean;
  tracing: boolean;
  endpointAuth: EndpointAuth | undefined;
  egressProxy: boolean;
  /** Verifies every signature with core's signing and counts; shared by the phases. */
  receiver: TestReceiver;
  /** The best setup of each workload, as the throughput phase found it (1 x 100 until it has run). */
  best: { W10: WorkerSetup; W1: WorkerSetup };
}

/** A table of the report, its cells formatted. */
export type Table = { title: string; columns: string[]; rows: string[][] };

/** One figure against its target. */
export type Check = { figure: string; measured: string; target: string; met: boolean };
export function check(figure: string, measured: string, target: string, met: boolean): Check {
  return { figure, measured, target, met };
}

/**
 * A phase: `run` measures and returns typed results; `report` turns them into tables and checks
 * against the phase's targets, which report.ts renders. Registered in phases.ts.
 */
export interface Phase<Result = unknown> {
  /** `name` for --only; `summary`, one line for --help. */
  name: string;
  title: string;
  summary: string;
  run(context: Context): Promise<Result>;
  report(result: Result): { tables: Table[]; checks: Check[] };
}

/** Ties a phase's result type to its report, for a registry of phases of any result. */
export function definePhase<Result>(phase: Phase<Result>): Phase {
  return phase as Phase;
}

/** A phase's settings at the run's scale. */
export const atScale = <T>(scale: Scale, settings: { full: T; quick: T }): T => settings[scale];

/** A table from one record per row: the first record's keys are the columns, in their order. */
export function table(title: string, records: Record<string, string>[]): Table {
  const columns = Object.keys(records[0] ?? {});
  return { title, columns, rows: records.map((record) => columns.map((column) => record[column] ?? "")) };
}
