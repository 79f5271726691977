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

/** On a signal, clean up and exit; a second signal exits at once. */
export function cleanUpOnSignals(): void {
  let interrupted = false;
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.on(signal, () => {
      if (interrupted) process.exit(130);
      interrupted = true;
      console.error(`\n${signal}: stopping the services and cleaning up...`);
      void runCleanup().finally(() => process.exit(130));
    });
  }
}
