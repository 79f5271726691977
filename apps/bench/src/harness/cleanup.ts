/**
 * Everything the bench creates registers its undo here; `runCleanup` undoes them newest first,
 * once, whether the run ends normally, throws, or is interrupted.
 */
const stack: { what: string; undo: () => Promise<void> }[] = [];
let running: Promise<void> | undefined;

/** Registers an undo action; returns a function that runs it now and forgets it. */
export function onCleanup(what: string, undo: () => Promise<void>): () => Promise<void> {
  const entry = { what, undo };
  stack.push(entry);
  return async () => {
    if (!stack.includes(entry)) return;
    stack.splice(stack.indexOf(entry), 1);
    await entry.undo();
  };
}

export function runCleanup(): Promise<void> {
  running ??= (async () => {
    for (let entry = stack.pop(); entry; entry = stack.pop()) {
      await entry.undo().catch((error: Error) => console.error(`cleanup: ${entry?.what} failed: ${error.message}`));
    }
  })();
  return running;
}

/**
 * On a signal or a stray error, clean up and exit. A repeated signal (npm run forwards Ctrl-C) is
 * ignored while the cleanup runs; one more than 5 s after the first exits at once.
 */
export function cleanUpOnSignals(): void {
  const exit = (code: number) => void runCleanup().finally(() => process.exit(code));
  const fail = (reason: unknown) => {
    console.error(reason instanceof Error ? (reason.stack ?? reason.message) : String(reason));
    exit(1);
  };
  process.on("unhandledRejection", fail).on("uncaughtException", fail);
  let firstSignalAt: number | undefined;
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.on(signal, () => {
      if (firstSignalAt !== undefined && Date.now() - firstSignalAt > 5_000) process.exit(130);
      if (firstSignalAt !== undefined) return;
      firstSignalAt = Date.now();
      console.error(`\n${signal}: stopping the services and cleaning up...`);
      exit(130);
    });
  }
}
