import { spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { onCleanup } from "../cleanup.ts";
import { layerOf, ownerOf, type ProfileSummary } from "./profile.ts";

/**
 * Machine-wide CPU sampling with Linux perf, when it is installed and permitted. Unlike V8's own
 * profiler, perf samples a thread only while it is on a CPU: on a 2-core machine where a worker is
 * preempted each time a socket write wakes PostgreSQL, V8's samples pile up on that write
 * (`writev`) although little CPU is spent there, while perf charges each sample to what really ran.
 * Node processes started with --perf-basic-prof write /tmp/perf-<pid>.map, which names their JS
 * frames in perf's call chains.
 */
export const PERF_NODE_FLAGS = ["--perf-basic-prof", "--interpreted-frames-native-stack"];

/** Whether perf is installed and may sample the whole machine (root, or perf_event_paranoid <= 0). */
export function perfAvailable(): boolean {
  return spawnSync("perf", ["stat", "-a", "-e", "cpu-clock", "--", "true"], { stdio: "ignore" }).status === 0;
}

/** Starts `perf record -a -g`; stop() ends it and resolves with the data file, or undefined. */
export function startMachineRecording(file: string): { stop(): Promise<string | undefined> } {
  const child = spawn("perf", ["record", "-a", "-g", "-e", "cpu-clock", "-F", "499", "-o", file], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let errors = "";
  child.stderr!.on("data", (chunk: Buffer) => (errors += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const stop = onCleanup("stop perf", async () => {
    child.kill("SIGINT");
    await exited;
  });
  return {
    async stop() {
      await stop();
      const code = await exited;
      // perf exits with the signal's status when interrupted; what matters is that it wrote the file.
      if (code !== 0 && code !== null && !/Captured and wrote/.test(errors)) {
        console.warn(`  perf record failed (${code}): ${errors.trim().split("\n").pop()}`);
        return undefined;
      }
      return file;
    },
  };
}

/**
 * V8 reuses code memory: the map names every code object ever created, and a range freed by one
 * (often start-up code) is later taken by another, so that perf, finding two names for an
 * address, may pick the dead one. Keeping only the newest entry wherever entries overlap makes
 * the names right for code alive at the end, which is what ran in a measured window late in the
 * process's life.
 */
export function keepNewestMapEntries(pid: number): void {
  const file = `/tmp/perf-${pid}.map`;
  if (!existsSync(file)) return;
  const entries = readFileSync(file, "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => {
      const [start = "0", size = "0"] = line.split(" ", 2);
      return { start: parseInt(start, 16), end: parseInt(start, 16) + parseInt(size, 16), line };
    });
  // Newest first; `kept` stays sorted by start, so each overlap test is a binary search.
  const kept: typeof entries = [];
  for (let i = entries.length - 1; i >= 0; i--) {
    const entry = entries[i]!;
    let low = 0;
    let high = kept.length;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (kept[middle]!.start < entry.start) low = middle + 1;
      else high = middle;
    }
    const overlapsNext = low < kept.length && kept[low]!.start < entry.end;
    const overlapsPrevious = low > 0 && kept[low - 1]!.end > entry.start;
    if (!overlapsNext && !overlapsPrevious) kept.splice(low, 0, entry);
  }
  writeFileSync(file, `${kept.map((entry) => entry.line).join("\n")}\n`);
}

/** Removes the /tmp/perf-<pid>.map files our profiled children wrote. */
export function removePerfMaps(pids: number[]): void {
  for (const pid of pids) rmSync(`/tmp/perf-${pid}.map`, { force: true });
}

function report(file: string, args: string[]): string {
  return spawnSync("perf", ["report", "-i", file, "--stdio", "-g", "none", ...args], {
    encoding: "utf8",
    maxBuffer: 256 * 1024 * 1024,
  }).stdout;
}

export interface ThreadProfile extends ProfileSummary {
  /** Share of the thread's samples taken in the kernel (for node: mostly loopback TCP sends). */
  kernelShare: number;
}

/**
 * One thread's samples (a node process's main thread has the process's pid), each charged to the
 * nearest frame up its call chain that belongs to a package or to our code, as profile.ts does
 * for V8 profiles, so that time in natives and in the kernel goes to whoever called them.
 */
export function threadProfile(file: string, tid: number): ThreadProfile | undefined {
  keepNewestMapEntries(tid);
  const script = spawnSync("perf", ["script", "-i", file, "--tid", String(tid), "-F", "ip,sym,dso"], {
    encoding: "utf8",
    maxBuffer: 512 * 1024 * 1024,
  }).stdout;
  const owners = new Map<string, number>();
  const functions = new Map<string, { name: string; owner: string; count: number }>();
  let samples = 0;
  let kernel = 0;
  for (const block of script.split(/\n\s*\n/)) {
    const frames = block
      .split("\n")
      .map((line) => /^\s*[0-9a-f]+ (.*) \((.*)\)$/.exec(line))
      .filter((match): match is RegExpExecArray => match !== null)
      .map((match) => ({ symbol: match[1]!.replace(/\+0x[0-9a-f]+$/, ""), dso: match[2]! }));
    if (frames.length === 0) continue;
    samples++;
    if (frames[0]!.dso === "[kernel.kallsyms]") kernel++;
    let owner = "node internals";
    let js: string | undefined;
    for (const frame of frames) {
      if (!frame.symbol.startsWith("JS:")) continue;
      // "JS:*name /path/file.js:line:column" (* optimized, ^ baseline, ~ interpreted)
      const [name = "", url = ""] = frame.symbol.slice(4).split(" ");
      js ??= `${name || "(anonymous)"} ${url.replace(/^.*\/(node_modules|main)\//, "").replace(/:\d+$/, "")}`;
      const found = ownerOf(url);
      if (found) {
        owner = found;
        break;
      }
    }
    owners.set(owner, (owners.get(owner) ?? 0) + 1);
    const name = js ?? `${frames[0]!.symbol} (native)`;
    const key = `${name}\u0000${owner}`;
    const entry = functions.get(key) ?? { name, owner, count: 0 };
    entry.count++;
    functions.set(key, entry);
  }
  if (samples === 0) return undefined;
  const layers = new Map<string, number>();
  for (const [owner, count] of owners) layers.set(layerOf(owner), (layers.get(layerOf(owner)) ?? 0) + count);
  return {
    file,
    busyMs: samples * 2.004, // -F 499
    kernelShare: kernel / samples,
    byOwner: [...owners]
      .map(([owner, count]) => ({ owner, ms: count * 2.004, share: count / samples }))
      .sort((a, b) => b.share - a.share),
    byLayer: [...layers].map(([layer, count]) => ({ layer, share: count / samples })).sort((a, b) => b.share - a.share),
    topFunctions: [...functions.values()]
      .map((entry) => ({ name: entry.name, owner: entry.owner, ms: entry.count * 2.004, share: entry.count / samples }))
      .sort((a, b) => b.share - a.share)
      .slice(0, 15),
  };
}

/**
 * Where PostgreSQL's backends spend their CPU. pg_stat_statements is not available on this
 * server, and EXPLAIN cannot see parse, plan or commit costs; perf's call graphs can: each share
 * is the fraction of backend samples under that PostgreSQL function (PostgreSQL 15 names).
 */
const STAGES = [
  { label: "parse (raw parser)", symbols: ["pg_parse_query"] },
  {
    label: "analyze and rewrite",
    symbols: [
      "pg_analyze_and_rewrite_varparams",
      "pg_analyze_and_rewrite_fixedparams",
      "pg_analyze_and_rewrite_withcb",
    ],
  },
  { label: "plan", symbols: ["pg_plan_queries"] },
  { label: "execute", symbols: ["PortalRun"] },
  { label: "  of which index maintenance", symbols: ["ExecInsertIndexTuples"] },
  { label: "commit", symbols: ["CommitTransactionCommand"] },
  { label: "  of which WAL flush (fsync)", symbols: ["XLogFlush"] },
] as const;

export interface PostgresBreakdown {
  /** Backend samples as a share of all samples on the machine. */
  backendShareOfMachine: number;
  stages: { label: string; share: number }[];
}

export function postgresBreakdown(file: string): PostgresBreakdown | undefined {
  const children = new Map<string, number>();
  for (const line of report(file, ["--comm", "postgres", "--children", "--sort", "sym"]).split("\n")) {
    const match = /^\s+([\d.]+)%\s+[\d.]+%\s+\[\.\]\s+(\S+)/.exec(line);
    if (match) children.set(match[2]!, Math.max(children.get(match[2]!) ?? 0, Number(match[1])));
  }
  const backend = children.get("PostgresMain");
  if (!backend) return undefined;
  return {
    backendShareOfMachine: backend / 100,
    stages: STAGES.map((stage) => ({
      label: stage.label,
      share: stage.symbols.reduce((sum, symbol) => sum + (children.get(symbol) ?? 0), 0) / backend,
    })),
  };
}
