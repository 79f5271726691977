export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Resolves with `promise`'s value, or with undefined after `timeoutMs`. */
export async function within<T>(promise: Promise<T>, timeoutMs: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), timeoutMs)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Polls `done` every `everyMs` until it holds or `timeoutMs` has passed; resolves with whether it held. */
export async function waitUntil(done: () => boolean | Promise<boolean>, timeoutMs: number, everyMs = 20) {
  const deadline = performance.now() + timeoutMs;
  while (!(await done())) {
    if (performance.now() > deadline) return false;
    await sleep(everyMs);
  }
  return true;
}
