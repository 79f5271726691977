import DataLoader from "dataloader";

/** One call, answered once its batch has run. */
export interface BatchLoader<K, V> {
  load(key: K): Promise<V>;
}

/**
 * Gathers the calls made during one turn of the event loop into one batch, for the statements
 * and scripts that many concurrent requests or jobs make at once (one publish statement, one
 * claim, one gate script per batch instead of one each): at high rates this divides round trips,
 * commits and per-call client work by the batch size, and a lone call waits for nothing.
 *
 * `inFlight` bounds how many batches are being written at once: calls that arrive meanwhile wait
 * and go together in the next batch, as soon as one ends. Under load that makes the batches
 * bigger; it costs a call at most the wait for one batch to end.
 */
export function batchLoader<K, V>(
  run: (keys: readonly K[]) => Promise<readonly (V | Error)[]>,
  options: { maxBatchSize: number; inFlight?: number },
): BatchLoader<K, V> {
  const bound = options.inFlight ?? Number.POSITIVE_INFINITY;
  let inFlight = 0;
  const waiting: (() => void)[] = [];
  return new DataLoader<K, V>(
    async (keys) => {
      inFlight++;
      try {
        return await run(keys);
      } finally {
        inFlight--;
        waiting.shift()?.();
      }
    },
    {
      cache: false,
      maxBatchSize: options.maxBatchSize,
      batchScheduleFn: (flush) =>
        setImmediate(() => {
          if (inFlight < bound) flush();
          else waiting.push(flush);
        }),
    },
  );
}
