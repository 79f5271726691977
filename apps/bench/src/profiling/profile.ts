import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { onCleanup } from "../cleanup.ts";

/**
 * Reads a V8 CPU profile (`node --cpu-prof`) and says where the process's CPU time went:
 * - by owner: each sample is charged to the nearest frame up its stack that belongs to a package
 *   (node_modules/<name>) or to our own code (apps/..., packages/...), so time spent in Node's
 *   internals or in native code (JSON, crypto, sockets) is charged to whoever called it;
 * - by function: self time of the hottest functions.
 */
interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileSummary {
  file: string;
  /** Samples taken while not idle, times the sampling interval: roughly CPU time. */
  busyMs: number;
  byOwner: { owner: string; ms: number; share: number }[];
  /** The owners grouped into the layers a reader thinks in (see `layerOf`). */
  byLayer: { layer: string; share: number }[];
  topFunctions: { name: string; owner: string; ms: number; share: number }[];
}

const SPECIAL = new Set(["(garbage collector)", "(program)", "(idle)", "(root)"]);

/** Which package or part of our code a frame belongs to, or undefined for internals and natives. */
export function ownerOf(url: string): string | undefined {
  const path = url.replace(/^file:\/\//, "");
  const modules = path.lastIndexOf("/node_modules/");
  if (modules !== -1) {
    const rest = path.slice(modules + "/node_modules/".length).split("/");
    return rest[0]?.startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0];
  }
  const ours = /\/(apps\/[^/]+|packages\/[^/]+)\/src\/(.*)$/.exec(path);
  if (ours) return ours[2]!.startsWith("generated/") ? "prisma generated client" : `${ours[1]}/src/${ours[2]}`;
  return undefined;
}

/**
 * `window`, in microseconds of CLOCK_MONOTONIC (V8's profile clock, and process.hrtime's), keeps
 * only the samples taken while the benchmark was measuring: start-up (tsx compiling every module)
 * would otherwise weigh on the picture.
 */
export function summarizeProfile(file: string, window?: { fromUs: number; toUs: number }): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, "utf8")) as CpuProfile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);

  // Count samples rather than summing the time between them: on a busy 2-core machine a process
  // is often descheduled (typically inside a socket write that wakes its peer), and the time
  // until the next sample would then be charged to that write although no CPU was used. A
  // sample is taken only while the thread runs, so counts approximate CPU time.
  const interval = median(profile.timeDeltas);
  const selfUs = new Map<number, number>();
  let at = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i] ?? 0;
    if (window && (at < window.fromUs || at > window.toUs)) continue;
    const id = profile.samples[i]!;
    selfUs.set(id, (selfUs.get(id) ?? 0) + interval);
  }

  const ownerOfNode = new Map<number, string>();
  const chargeTo = (id: number): string => {
    const cached = ownerOfNode.get(id);
    if (cached) return cached;
    const node = byId.get(id)!;
    let owner: string;
    if (SPECIAL.has(node.callFrame.functionName)) owner = node.callFrame.functionName;
    else {
      const own = ownerOf(node.callFrame.url);
      const up = parent.get(id);
      owner = own ?? (up === undefined ? "node internals" : chargeTo(up));
      if (owner === "(root)") owner = node.callFrame.url.startsWith("node:") ? "node internals" : "native / runtime";
    }
    ownerOfNode.set(id, owner);
    return owner;
  };

  const owners = new Map<string, number>();
  const functions = new Map<string, { name: string; owner: string; us: number }>();
  let busyUs = 0;
  for (const [id, us] of selfUs) {
    const node = byId.get(id)!;
    if (node.callFrame.functionName === "(idle)") continue;
    busyUs += us;
    const owner = chargeTo(id);
    owners.set(owner, (owners.get(owner) ?? 0) + us);
    const where = node.callFrame.url
      ? `${node.callFrame.url.replace(/^.*\/(node_modules|main)\//, "")}:${node.callFrame.lineNumber + 1}`
      : "native";
    const name = `${node.callFrame.functionName || "(anonymous)"} ${where}`;
    const key = `${name}\u0000${owner}`;
    const entry = functions.get(key) ?? { name, owner, us: 0 };
    entry.us += us;
    functions.set(key, entry);
  }
  const share = (us: number) => us / Math.max(1, busyUs);
  const layers = new Map<string, number>();
  for (const [owner, us] of owners) layers.set(layerOf(owner), (layers.get(layerOf(owner)) ?? 0) + us);
  return {
    file,
    busyMs: busyUs / 1000,
    byOwner: [...owners].map(([owner, us]) => ({ owner, ms: us / 1000, share: share(us) })).sort((a, b) => b.ms - a.ms),
    byLayer: [...layers].map(([layer, us]) => ({ layer, share: share(us) })).sort((a, b) => b.share - a.share),
    topFunctions: [...functions.values()]
      .map((entry) => ({ name: entry.name, owner: entry.owner, ms: entry.us / 1000, share: share(entry.us) }))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, 15),
  };
}

const LAYERS: [RegExp, string][] = [
  [/^(@prisma\/|prisma generated client)/, "Prisma (client runtime, pg adapter)"],
  [/^(pg|pg-protocol|pg-pool|pg-types|postgres-\w+)$/, "node-postgres (incl. its socket writes)"],
  // debug is ioredis's logging helper: ioredis asks it whether logging is enabled on every command.
  [
    /^(bullmq|ioredis|@ioredis\/.*|msgpackr|cluster-key-slot|denque|redis-.*|standard-as-callback|debug|cron-parser|lodash)$/,
    "BullMQ + ioredis",
  ],
  [/^undici$/, "undici (webhook HTTP client)"],
  [/^(hono|@hono\/.*)$/, "Hono + @hono/node-server (HTTP server)"],
  [/^(zod|@asteasolutions\/.*)$/, "zod (validation)"],
  [/^ulid$/, "ulid (ids)"],
  [
    /^(pino|pino-.*|@pinojs\/.*|sonic-boom|thread-stream|fast-redact|on-exit-leak-free|quick-format-unescaped|atomic-sleep|safe-stable-stringify)$/,
    "pino (logs)",
  ],
  [/^(prom-client|tdigest|bintrees)$/, "prom-client (metrics)"],
  [/^(tsx|esbuild|get-tsconfig|swagger-ui-dist)$/, "start-up (tsx compiling, docs assets)"],
  [/^(apps|packages)\//, "our code (apps/, packages/)"],
  [/^\(garbage collector\)$/, "garbage collector"],
  [/^(node internals|native \/ runtime|\(program\)|\(root\))$/, "Node.js internals, native, runtime"],
];

/** The layer an owner belongs to, for a short table; anything unknown keeps its own name. */
export function layerOf(owner: string): string {
  return LAYERS.find(([pattern]) => pattern.test(owner))?.[1] ?? owner;
}

/** The biggest profile in a directory: tsx's launcher writes a small one beside the service's. */
export function mainProfileIn(dir: string): string | undefined {
  const files = readdirSync(dir)
    .filter((name) => name.endsWith(".cpuprofile"))
    .map((name) => join(dir, name));
  return files.sort((a, b) => statSync(b).size - statSync(a).size)[0];
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[sorted.length >> 1] ?? 1_000;
}

/** A temporary directory for profiles, removed at the end of the run. */
export function profileDirectory(): string {
  const dir = mkdtempSync(join(tmpdir(), "webhooks-bench-"));
  onCleanup("remove the profiles", async () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Node flags that write a CPU profile into `dir` when the process exits. */
export function cpuProfileArgs(dir: string): string[] {
  mkdirSync(dir, { recursive: true });
  return ["--cpu-prof", `--cpu-prof-dir=${dir}`];
}
