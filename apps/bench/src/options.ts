import { parseArgs } from "node:util";
import { ROOT } from "./harness/config.ts";
import { ENDPOINT_AUTHS } from "./harness/endpoint.ts";

/** The run's options: `only` lists the phases to run, in the registry's order (all when not given); `out` the report's file, if any. */
export type Options = ReturnType<typeof parseOptions>;

/** A mistake on the command line: main prints it with a pointer to --help and exits 1. */
export class UsageError extends Error {}

/** The report file of a full run, at the repository's root (ignored by git). */
export const DEFAULT_OUT = `${ROOT}BENCHMARKS.tmp.md`;

function parse(argv: string[]) {
  const flag = { type: "boolean", default: false } as const;
  const options = { help: { ...flag, short: "h" }, quick: flag, profile: flag, tracing: flag, "egress-proxy": flag };
  const text = { type: "string" } as const;
  try {
    return parseArgs({ args: argv, options: { ...options, only: text, "endpoint-auth": text, out: text } }).values;
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

export function parseOptions(argv: string[], phases: readonly { name: string }[]) {
  const phaseNames = phases.map((phase) => phase.name);
  const { only: onlyList, out, "endpoint-auth": auth, "egress-proxy": egressProxy, ...flags } = parse(argv);
  const only = onlyList?.split(",").map((name) => name.trim());
  const unknown = only?.filter((name) => !phaseNames.includes(name)) ?? [];
  if (only?.length === 0 || unknown.length > 0) {
    throw new UsageError(
      `--only ${onlyList ?? ""}: no phase named ${unknown.join(", ") || "''"}; the phases are ${phaseNames.join(", ")}`,
    );
  }
  if (out === "") throw new UsageError("--out needs a file name");
  const endpointAuth = ENDPOINT_AUTHS.find((kind) => kind === auth);
  if (auth !== undefined && !endpointAuth)
    throw new UsageError(`--endpoint-auth ${auth}: expected one of ${ENDPOINT_AUTHS.join(", ")}`);
  return {
    ...flags,
    only: only && phaseNames.filter((name) => only.includes(name)),
    endpointAuth,
    egressProxy,
    out: out ?? (only ? undefined : DEFAULT_OUT),
  };
}

export function helpText(phases: readonly { name: string; summary: string }[]): string {
  const width = Math.max(...phases.map((phase) => phase.name.length));
  return `Usage: npm run bench -- [options]

Runs the phases against local PostgreSQL and Redis, prints each phase's tables and its checks
against the targets, and cleans up everything it started or created. A full run takes over an hour.

Phases, in the order of a full run:
${phases.map((phase) => `  ${phase.name.padEnd(width)}  ${phase.summary}`).join("\n")}

Options:
  --only <phase,...>  run only these phases (at the worker setup 1 x 100, unless throughput
                      runs first and finds the best one)
  --quick             every phase at a small size, to check that it works in a few minutes;
                      its figures are not results
  --profile           run the API and the workers under node --cpu-prof; their profiles go to
                      artifacts/profiles/ (open them in Chrome DevTools or speedscope)
  --tracing           the services export traces to a loopback OTLP sink (alternate with runs without)
  --endpoint-auth <basic|oauth2|mtls>
                      the lone phase's endpoint demands HTTP Basic, an OAuth2 token (from a token
                      server on loopback) or a client certificate (HTTPS, mutual TLS)
  --egress-proxy      the lone phase's workers send through an egress proxy on loopback
  --out <file>        also write the report to <file> (a full run writes
                      BENCHMARKS.tmp.md at the repository root)
  -h, --help          print this and exit

Environment:
  BENCH_ADMIN_DATABASE_URL  an admin connection, where the bench creates its databases
                            (default postgresql://postgres@127.0.0.1:5432/postgres)
  BENCH_REDIS_URL           the Redis to use (default redis://127.0.0.1:6379)
`;
}
