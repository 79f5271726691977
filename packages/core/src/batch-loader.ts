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
 *
 * `gatherMs` spaces batches out while calls keep coming: a batch starts at most that long after
 * the one before it, with every call made meanwhile. A steady stream of calls that would each go
 * alone (one request at a time, never enough at once to fill a turn) then shares its batches; a
 * call after a quieter spell still goes at once, so it costs a call at most `gatherMs`.
 */
export function batchLoader<K, V>(
  run: (keys: readonly K[]) => Promise<readonly (V | Error)[]>,
  options: { maxBatchSize: number; inFlight?: number; gatherMs?: number },
): BatchLoader<K, V> {
  const bound = options.inFlight ?? Number.POSITIVE_INFINITY;
  const gatherMs = options.gatherMs ?? 0;
  let inFlight = 0;
  let lastStart = Number.NEGATIVE_INFINITY;
  const waiting: (() => void)[] = [];
  return new DataLoader<K, V>(
    async (keys) => {
      inFlight++;
      lastStart = performance.now();
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
      batchScheduleFn: (flush) => {
        const go = () => {
          if (inFlight < bound) flush();
          else waiting.push(flush);
        };
        const gathering = lastStart + gatherMs - performance.now();
        if (gathering > 0) setTimeout(go, gathering);
        else setImmediate(go);
      },
    },
  );
}
