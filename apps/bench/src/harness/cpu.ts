import { readdirSync, readFileSync } from "node:fs";

/**
 * Where the machine's CPU went over a window, read from /proc (Linux): per target (the children we
 * started, PostgreSQL, Redis, this process) and for the whole machine.
 */
type ProcessInfo = { pid: number; pgrp: number; comm: string; cmdline: string; ticks: number };

/** Whose CPU to count: a label, and which processes are its. */
export type CpuTarget = { label: string; owns(process: ProcessInfo): boolean };

/** Cores used on average over the window, per target and for the whole machine (1.0 = one core fully busy). */
export type CpuUsage = { seconds: number; cores: { label: string; cores: number }[]; machineCores: number };

function readProcesses(): Map<number, ProcessInfo> {
  const processes = new Map<number, ProcessInfo>();
  for (const pid of readdirSync("/proc").filter((entry) => /^\d+$/.test(entry))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      // After "pid (comm) ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      // PostgreSQL names each backend's database in its title, which tells ours from others'.
      const cmdline = comm === "postgres" ? readFileSync(`/proc/${pid}/cmdline`, "utf8") : "";
      const ticks = Number(fields[11]) + Number(fields[12]);
      processes.set(Number(pid), { pid: Number(pid), pgrp: Number(fields[2]), comm, cmdline, ticks });
    } catch {
      // The process exited while we were reading.
    }
  }
  return processes;
}

/** Busy and total ticks of the machine, and its core count. */
function readMachine() {
  const stat = readFileSync("/proc/stat", "utf8");
  const allCores = stat.slice(0, stat.indexOf("\n"));
  const [user, nice, system, idle, iowait, irq, softirq, steal] = allCores.split(/\s+/).slice(1).map(Number);
  const busy = user! + nice! + system! + irq! + softirq! + steal!;
  return { busy, total: busy + idle! + iowait!, cores: stat.match(/^cpu\d+ /gm)?.length ?? 1 };
}

/** Opens a window; the function it returns closes it. `targets` are read when it closes, so a process started in between counts. */
export function startCpuWindow(targets: () => CpuTarget[]): () => CpuUsage {
  const [started, before, machineBefore] = [performance.now(), readProcesses(), readMachine()];
  return () => {
    const [after, machine, seconds] = [readProcesses(), readMachine(), (performance.now() - started) / 1000];
    const cores = targets().map((target) => {
      let ticks = 0;
      for (const info of after.values())
        if (target.owns(info)) ticks += info.ticks - (before.get(info.pid)?.ticks ?? 0);
      return { label: target.label, cores: ticks / 100 / seconds }; // USER_HZ, /proc's unit of time, is 100
    });
    const share = (machine.busy - machineBefore.busy) / Math.max(1, machine.total - machineBefore.total);
    return { seconds, cores, machineCores: share * machine.cores };
  };
}

/** A child we started, with everything it runs (its process group). */
export const groupTarget = (label: string, owner: number): CpuTarget => ({ label, owns: (p) => p.pgrp === owner });
const REDIS_TARGET: CpuTarget = { label: "redis", owns: (p) => p.comm === "redis-server" };
const BENCH_TARGET: CpuTarget = { label: "bench", owns: (p) => p.pid === process.pid };

/** What every window counts besides the children: PostgreSQL on behalf of `database`, Redis and the bench. */
export const sharedTargets = (database: string) => [postgresTarget(database), REDIS_TARGET, BENCH_TARGET];

/** PostgreSQL's CPU on our behalf: our database's backends and the shared background processes. */
const clientBackend = /\d+\.\d+\.\d+\.\d+\(\d+\)|\[local\]/;
const postgresTarget = (database: string): CpuTarget => ({
  label: "postgres",
  owns: (p) => p.comm === "postgres" && (!clientBackend.test(p.cmdline) || p.cmdline.includes(` ${database} `)),
});

/** The processes of a CPU-per-item breakdown, as coresOf matches labels. */
export const PROCESSES = ["api", "worker", "postgres", "redis", "bench"];

/** Cores used by the targets whose label starts with one of `labels` (by default all but the bench). */
export function coresOf(cpu: CpuUsage, labels?: string[]): number {
  const counted = cpu.cores.filter((c) => (labels ? labels.some((l) => c.label.startsWith(l)) : c.label !== "bench"));
  return counted.reduce((sum, c) => sum + c.cores, 0);
}

/** ms of CPU per item, of the targets `labels` picks as in coresOf. */
export const cpuMsPer = (cpu: CpuUsage, items: number, labels?: string[]) =>
  (coresOf(cpu, labels) * cpu.seconds * 1000) / Math.max(1, items);

/** "api 0.45, worker-1 0.52, ...; machine 1.93": cores by process. */
export function describeCores(cpu: CpuUsage): string {
  return `${cpu.cores.map((c) => `${c.label} ${c.cores.toFixed(2)}`).join(", ")}; machine ${cpu.machineCores.toFixed(2)}`;
}
