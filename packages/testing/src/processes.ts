import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));

export interface ServiceProcess {
  child: ChildProcess;
  /** Everything it printed. */
  output(): string;
  /** Resolves with the exit code (or the signal's name) when it exits. */
  exited: Promise<number | string>;
  kill(signal: NodeJS.Signals): void;
}

/**
 * Runs one of the apps (`apps/<name>/src/main.ts`) as a real process, the way `npm start` does,
 * and waits until it prints `ready`.
 */
export async function spawnService(
  name: "api" | "worker",
  env: Record<string, string>,
  options: { ready?: string; timeoutMs?: number } = {},
): Promise<ServiceProcess> {
  // node --import tsx, not the tsx CLI: the CLI runs the app in a child process of its own, so a
  // SIGKILL would kill the wrapper and leave the app running.
  const child = spawn(process.execPath, ["--import", "tsx", `${ROOT}apps/${name}/src/main.ts`], {
    cwd: `${ROOT}apps/${name}`,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", LOG_LEVEL: "info", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
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
