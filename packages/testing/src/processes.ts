import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));

export interface ServiceProcess {
  child: ChildProcess;
  /** What it printed (the last 1 MB of it). */
  output(): string;
  /** Resolves with the exit code (or the signal's name) when it exits. */
  exited: Promise<number | string>;
  kill(signal: NodeJS.Signals): void;
}

export interface SpawnOptions {
  /** What it prints once ready: `worker started` or `API listening` unless given. */
  ready?: string;
  timeoutMs?: number;
  /** Run the production build (`apps/<name>/dist/main.js`, plain node) instead of the sources. */
  compiled?: boolean;
}

/** The command line of an app: its sources through tsx, as `npm start` runs them, or its build. */
function serviceArgs(name: "api" | "worker", compiled: boolean | undefined): string[] {
  // node --import tsx, not the tsx CLI: the CLI runs the app in a child process of its own, so a
  // SIGKILL would kill the wrapper and leave the app running.
  return compiled ? [`${ROOT}apps/${name}/dist/main.js`] : ["--import", "tsx", `${ROOT}apps/${name}/src/main.ts`];
}

function serviceEnv(env: Record<string, string>): Record<string, string> {
  return { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", LOG_LEVEL: "info", ...env };
}

/**
 * Runs one of the apps (`apps/<name>/src/main.ts`) as a real process, the way `npm start` does,
 * and waits until it prints `ready`.
 */
export async function spawnService(
  name: "api" | "worker",
  env: Record<string, string>,
  options: SpawnOptions = {},
): Promise<ServiceProcess> {
  const child = spawn(process.execPath, serviceArgs(name, options.compiled), {
    cwd: `${ROOT}apps/${name}`,
    env: serviceEnv(env),
    stdio: ["ignore", "pipe", "pipe"],
  });
  // The last 1 MB of it: a process under load (the chaos run) logs a line per request.
  let output = "";
  const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-1_000_000));
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);
  const exited = new Promise<number | string>((resolve) =>
    child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown")),
  );
  const ready = options.ready ?? (name === "worker" ? "worker started" : "API listening");

  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      // The caller gets no handle to a process that failed to start: stop it here, or it lives on.
      child.kill("SIGKILL");
      reject(new Error(`${name} did not start in time:\n${output}`));
    }, options.timeoutMs ?? 30_000);
    const check = () => {
      if (output.includes(ready)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on("data", check);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code}) before it was ready:\n${output}`));
    });
  });

  return { child, output: () => output, exited, kill: (signal) => child.kill(signal) };
}

export interface FailedStart {
  code: number | string;
  stdout: string;
  stderr: string;
}

/** Runs one of the apps that is expected not to start, and resolves with how it exited and what it printed. */
export async function runFailingService(
  name: "api" | "worker",
  env: Record<string, string>,
  options: { timeoutMs?: number; compiled?: boolean } = {},
): Promise<FailedStart> {
  const child = spawn(process.execPath, serviceArgs(name, options.compiled), {
    cwd: `${ROOT}apps/${name}`,
    env: serviceEnv(env),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    // Just under a test's own limit: starting the sources through tsx is slow on a busy machine.
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${name} was expected to stop, and was still running:\n${stdout}${stderr}`));
    }, options.timeoutMs ?? 50_000);
    // "close", not "exit": by then all it printed has been read.
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? signal ?? "unknown", stdout, stderr });
    });
  });
}
