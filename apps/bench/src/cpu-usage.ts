import { existsSync, readdirSync, readFileSync } from "node:fs";

/**
 * Where the machine's CPU went during a measured window, read from /proc (Linux): per process
 * group of each child we started, for PostgreSQL and Redis (all their processes), for this
 * process (publisher + receiver), and for the whole machine. On a 2-core machine everything
 * competes for the same cores, so this says who the cores were busy for. Without /proc (not
 * Linux) every figure is 0.
 */
/** USER_HZ, the unit of /proc/<pid>/stat's times: 100 on Linux. */
const TICKS_PER_SECOND = 100;

export interface CpuTarget {
  label: string;
  /** A process group id (children we started) ... */
  processGroup?: number;
  /** ... or a command name (postgres, redis-server), optionally narrowed by its command line ... */
  command?: string;
  commandLine?: (cmdline: string) => boolean;
  /** ... or a single pid. */
  pid?: number;
}

interface ProcessTicks {
  ticks: number;
  pgrp: number;
  comm: string;
  cmdline: string;
}

interface Snapshot {
  at: number;
  perPid: Map<number, ProcessTicks>;
  machineBusy: number;
  machineTotal: number;
}

function readSnapshot(): Snapshot {
  const perPid = new Map<number, ProcessTicks>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const close = stat.lastIndexOf(")");
      const comm = stat.slice(stat.indexOf("(") + 1, close);
      const fields = stat.slice(close + 2).split(" ");
      // After "pid (comm) ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
      // PostgreSQL names each backend's database in its title, which tells ours from others'.
      const cmdline = comm === "postgres" ? readFileSync(`/proc/${entry}/cmdline`, "utf8") : "";
      perPid.set(Number(entry), {
        ticks: Number(fields[11]) + Number(fields[12]),
        pgrp: Number(fields[2]),
        comm,
        cmdline,
      });
    } catch {
      // The process exited while we were reading.
    }
  }
  const cpu = readFileSync("/proc/stat", "utf8").split("\n")[0]!.split(/\s+/).slice(1).map(Number);
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = cpu;
  const busy = user + nice + system + irq + softirq + steal;
  return { at: performance.now(), perPid, machineBusy: busy, machineTotal: busy + idle + iowait };
}

export interface CpuUsage {
  seconds: number;
  /** Cores used on average over the window, per target (1.0 = one core fully busy). */
  cores: { label: string; cores: number }[];
  /** All cores of the machine, busy on average. */
  machineCores: number;
  /** The busiest other commands (other users of the machine, kernel threads), for context. */
  others: { command: string; cores: number }[];
}

export function startCpuWindow(targets: CpuTarget[]): () => CpuUsage {
  if (!existsSync("/proc/stat")) {
    const started = performance.now();
    return () => ({
      seconds: (performance.now() - started) / 1000,
      cores: targets.map((t) => ({ label: t.label, cores: 0 })),
      machineCores: 0,
      others: [],
    });
  }
  const before = readSnapshot();
  return () => {
    const after = readSnapshot();
    const seconds = (after.at - before.at) / 1000;
    const matches = (target: CpuTarget, pid: number, info: ProcessTicks) =>
      target.pid === pid ||
      (target.processGroup !== undefined && info.pgrp === target.processGroup) ||
      (target.command !== undefined && info.comm === target.command && (target.commandLine?.(info.cmdline) ?? true));
    const otherTicks = new Map<string, number>();
    for (const [pid, info] of after.perPid) {
      if (targets.some((target) => matches(target, pid, info))) continue;
      const ticks = info.ticks - (before.perPid.get(pid)?.ticks ?? 0);
      const command = info.comm === "postgres" ? "postgres (other databases)" : info.comm;
      if (ticks > 0) otherTicks.set(command, (otherTicks.get(command) ?? 0) + ticks);
    }
    const others = [...otherTicks]
      .map(([command, ticks]) => ({ command, cores: ticks / TICKS_PER_SECOND / seconds }))
      .sort((a, b) => b.cores - a.cores)
      .slice(0, 5);
    const cores = targets.map((target) => {
      let ticks = 0;
      for (const [pid, info] of after.perPid) {
        if (!matches(target, pid, info)) continue;
        ticks += info.ticks - (before.perPid.get(pid)?.ticks ?? 0);
      }
      return { label: target.label, cores: ticks / TICKS_PER_SECOND / seconds };
    });
    const share = (after.machineBusy - before.machineBusy) / Math.max(1, after.machineTotal - before.machineTotal);
    const coreCount = readFileSync("/proc/stat", "utf8")
      .split("\n")
      .filter((line) => /^cpu\d+ /.test(line)).length;
    return { seconds, cores, machineCores: share * coreCount, others };
  };
}

export function describeCpu(usage: CpuUsage): string {
  const others = usage.others.map((entry) => `${entry.command} ${entry.cores.toFixed(2)}`).join(", ");
  return (
    usage.cores.map((entry) => `${entry.label} ${entry.cores.toFixed(2)}`).join(", ") +
    `; machine ${usage.machineCores.toFixed(2)} cores busy; others: ${others}`
  );
}

/**
 * PostgreSQL's CPU on our behalf: backends connected to our databases, plus the shared background
 * processes (WAL writer, checkpointer, ...). Backends of other databases (other users of this
 * server) are not ours.
 */
export function postgresTarget(databases: readonly string[]): CpuTarget {
  const clientBackend = /\d+\.\d+\.\d+\.\d+\(\d+\)|\[local\]/;
  return {
    label: "postgres",
    command: "postgres",
    commandLine: (cmdline) => !clientBackend.test(cmdline) || databases.some((name) => cmdline.includes(` ${name} `)),
  };
}
