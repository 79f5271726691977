/** Raised by `withDeadline` when the work did not settle in time. */
export class DeadlineExceeded extends Error {
  override name = "DeadlineExceeded";
}

/**
 * The outcome of `work`, or a DeadlineExceeded after `ms`. For the places that must not wait on
 * something that may never answer: a request on a Redis that is down, a readiness probe, a close
 * stuck on a dead connection. The work itself is not cancelled; it settles (or not) on its own.
 */
export async function withDeadline<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineExceeded(`${what} did not answer within ${ms} ms`)), ms);
    timer.unref();
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Whether `work` settled (fulfilled or rejected) within `ms`. */
export async function settlesWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  const settled = work.then(
    () => true,
    () => true,
  );
  return withDeadline(settled, ms, "work").catch(() => false);
}
