/**
 * Everything the benchmark creates registers how to undo it here: child processes, servers,
 * connections, databases, Redis keys. `runCleanup` undoes them newest first, once, whether the run
 * ends normally, throws, or is interrupted (Ctrl-C, SIGTERM).
 */
type Undo = { what: string; undo: () => Promise<void> };

const stack: Undo[] = [];
let running: Promise<void> | undefined;

/** Registers an undo action; returns a function that runs it now and forgets it. */
export function onCleanup(what: string, undo: () => Promise<void>): () => Promise<void> {
  const entry: Undo = { what, undo };
  stack.push(entry);
  return async () => {
    const index = stack.indexOf(entry);
    if (index === -1) return;
    stack.splice(index, 1);
    await entry.undo();
  };
}

export function runCleanup(): Promise<void> {
  running ??= (async () => {
    while (stack.length > 0) {
      const entry = stack.pop()!;
      try {
        await entry.undo();
      } catch (error) {
        console.error(`cleanup: ${entry.what} failed: ${(error as Error).message}`);
      }
    }
  })();
  return running;
}

/**
 * On a signal, clean up and exit. `npm run` forwards the terminal's Ctrl-C to us although we got it
 * already, so a repeated signal is ignored while the cleanup runs; one that comes more than 5 s
 * after the first (a cleanup that hangs) exits at once. A stray error also cleans up.
 */
export function cleanUpOnSignals(): void {
  const fail = (what: string) => (reason: unknown) => {
    console.error(`${what}: ${reason instanceof Error ? (reason.stack ?? reason.message) : String(reason)}`);
    void runCleanup().finally(() => process.exit(1));
  };
  process.on("unhandledRejection", fail("unhandled rejection"));
  process.on("uncaughtException", fail("uncaught exception"));
  let firstSignalAt: number | undefined;
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.on(signal, () => {
      if (firstSignalAt !== undefined) {
        if (Date.now() - firstSignalAt > 5_000) process.exit(130);
        return;
      }
      firstSignalAt = Date.now();
      console.error(`\n${signal}: stopping the services and cleaning up...`);
      void runCleanup().finally(() => process.exit(130));
    });
  }
}
