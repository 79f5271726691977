import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";

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
  topFunctions: { name: string; owner: string; ms: number; share: number }[];
}

const SPECIAL = new Set(["(garbage collector)", "(program)", "(idle)", "(root)"]);

/** Which package or part of our code a frame belongs to, or undefined for internals and natives. */
function ownerOf(url: string): string | undefined {
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

export function summarizeProfile(file: string): ProfileSummary {
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
  for (const id of profile.samples) selfUs.set(id, (selfUs.get(id) ?? 0) + interval);

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
  const functions = new Map<string, { owner: string; us: number }>();
  let busyUs = 0;
  for (const [id, us] of selfUs) {
    const node = byId.get(id)!;
    if (node.callFrame.functionName === "(idle)") continue;
    busyUs += us;
    const owner = chargeTo(id);
    owners.set(owner, (owners.get(owner) ?? 0) + us);
    const where = node.callFrame.url ? `${node.callFrame.url.replace(/^.*\/(node_modules|main)\//, "")}:${node.callFrame.lineNumber + 1}` : "native";
    const name = `${node.callFrame.functionName || "(anonymous)"} ${where}`;
    const entry = functions.get(name) ?? { owner, us: 0 };
    entry.us += us;
    functions.set(name, entry);
  }
  const share = (us: number) => us / Math.max(1, busyUs);
  return {
    file,
    busyMs: busyUs / 1000,
    byOwner: [...owners].map(([owner, us]) => ({ owner, ms: us / 1000, share: share(us) })).sort((a, b) => b.ms - a.ms),
    topFunctions: [...functions]
      .map(([name, entry]) => ({ name, owner: entry.owner, ms: entry.us / 1000, share: share(entry.us) }))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, 15),
  };
}

/** The biggest profile in a directory: tsx's launcher writes a small one beside the service's. */
export function mainProfileIn(dir: string): string | undefined {
  const files = readdirSync(dir).filter((name) => name.endsWith(".cpuprofile")).map((name) => join(dir, name));
  return files.sort((a, b) => statSync(b).size - statSync(a).size)[0];
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[sorted.length >> 1] ?? 1_000;
}
