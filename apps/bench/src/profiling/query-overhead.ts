import { type ChildProcess, execFile } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import { createDatabase } from "@webhooks/db";
import pg from "pg";
import { onCleanup } from "../cleanup.ts";

export interface QueryOverhead {
  /** CPU per `SELECT 1`, in microseconds, and the mean round trip, in ms, one query at a time. */
  prisma: { cpuUs: number; meanMs: number };
  pg: { cpuUs: number; meanMs: number };
}

const WARMUP = 3_000;
const QUERIES = 5_000;

/**
 * What one query costs a Node process through Prisma's `$queryRaw` (the way every query of the
 * product goes: Prisma's client runtime, its pg adapter, then node-postgres), compared with
 * node-postgres alone. `SELECT 1` makes PostgreSQL's part negligible, so the difference is the
 * client-side overhead of a round trip. It runs in a fresh child process: process.cpuUsage()
 * counts the garbage collector's threads too, and the benchmark process's large heap would make
 * every collection dearer than in a service.
 */
export async function measureQueryOverhead(databaseUrl: string): Promise<QueryOverhead> {
  const tsx = fileURLToPath(new URL("../../../../node_modules/.bin/tsx", import.meta.url));
  let child: ChildProcess | undefined;
  const stdout = new Promise<string>((resolve, reject) => {
    child = execFile(tsx, [fileURLToPath(import.meta.url), databaseUrl], { timeout: 120_000 }, (error, out) =>
      error ? reject(error) : resolve(out),
    );
  });
  const stop = onCleanup("stop the query-overhead child", async () => void child?.kill("SIGTERM"));
  try {
    return JSON.parse((await stdout).trim().split("\n").pop()!) as QueryOverhead;
  } finally {
    await stop();
  }
}

async function measure(query: () => Promise<unknown>): Promise<{ cpuUs: number; meanMs: number }> {
  for (let i = 0; i < WARMUP; i++) await query();
  const cpu = process.cpuUsage();
  const started = performance.now();
  for (let i = 0; i < QUERIES; i++) await query();
  const elapsed = performance.now() - started;
  const used = process.cpuUsage(cpu);
  return { cpuUs: (used.user + used.system) / QUERIES, meanMs: elapsed / QUERIES };
}

// Run as a script (by measureQueryOverhead): measure, print the result as JSON, exit.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const databaseUrl = process.argv[2]!;
  const database = createDatabase({ databaseUrl, poolSize: 1 });
  const prisma = database.prisma;
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  pool.on("error", () => {}); // an idle connection lost: the next query reports it
  try {
    const result: QueryOverhead = {
      prisma: await measure(() => prisma.$queryRaw`SELECT 1`),
      pg: await measure(() => pool.query("SELECT 1")),
    };
    console.log(JSON.stringify(result));
  } finally {
    await database.close();
    await pool.end();
  }
}
