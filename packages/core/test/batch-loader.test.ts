import { describe, expect, it } from "vitest";
import { batchLoader } from "../src/batch-loader.ts";

/** A batch function that records its batches and answers each when `release` is called. */
function recordingRun() {
  const batches: number[][] = [];
  const pending: (() => void)[] = [];
  const run = async (keys: readonly number[]) => {
    batches.push([...keys]);
    await new Promise<void>((resolve) => pending.push(resolve));
    return keys.map((key) => key * 10);
  };
  const releaseAll = () => {
    for (const resolve of pending.splice(0)) resolve();
  };
  return { batches, run, releaseAll };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("batchLoader", () => {
  it("sends the calls of one turn of the event loop as one batch, and answers each its own", async () => {
    const { batches, run, releaseAll } = recordingRun();
    const loader = batchLoader(run, { maxBatchSize: 10 });
    const answers = Promise.all([1, 2, 3].map((key) => loader.load(key)));
    await turn();
    releaseAll();
    expect(await answers).toEqual([10, 20, 30]);
    expect(batches).toEqual([[1, 2, 3]]);
  });

  it("without a bound, starts a batch every turn, even while others run", async () => {
    const { batches, run, releaseAll } = recordingRun();
    const loader = batchLoader(run, { maxBatchSize: 10 });
    const first = loader.load(1);
    await turn();
    const second = loader.load(2);
    await turn();
    expect(batches).toEqual([[1], [2]]);
    releaseAll();
    expect(await Promise.all([first, second])).toEqual([10, 20]);
  });

  it("with inFlight 1, gathers the calls made while a batch runs into the next one, sent when it ends", async () => {
    const { batches, run, releaseAll } = recordingRun();
    const loader = batchLoader(run, { maxBatchSize: 10, inFlight: 1 });
    const first = loader.load(1);
    await turn();
    const waiting = [2, 3, 4].map((key) => loader.load(key));
    await turn();
    await turn();
    // A lone call went at once; the others wait for it.
    expect(batches).toEqual([[1]]);
    releaseAll();
    expect(await first).toBe(10);
    await turn();
    expect(batches).toEqual([[1], [2, 3, 4]]);
    releaseAll();
    expect(await Promise.all(waiting)).toEqual([20, 30, 40]);
  });

  it("with gatherMs, starts a batch at most that long after the one before while calls keep coming", async () => {
    const { batches, run, releaseAll } = recordingRun();
    const loader = batchLoader(run, { maxBatchSize: 10, gatherMs: 1_000 });
    const first = loader.load(1);
    await turn();
    // The first call went at once; the next ones, made right after, wait for the window to close.
    expect(batches).toEqual([[1]]);
    releaseAll();
    const gathered = [2, 3].map((key) => loader.load(key));
    await turn();
    await turn();
    expect(batches).toEqual([[1]]);
    await sleep(100);
    gathered.push(loader.load(4));
    await sleep(1_100);
    expect(batches).toEqual([[1], [2, 3, 4]]);
    releaseAll();
    expect(await Promise.all([first, ...gathered])).toEqual([10, 20, 30, 40]);
    // After a quieter spell than the window, a call goes at once again.
    await sleep(1_100);
    const alone = loader.load(5);
    await turn();
    expect(batches).toEqual([[1], [2, 3, 4], [5]]);
    releaseAll();
    expect(await alone).toBe(50);
  });

  it("splits a turn's calls at maxBatchSize", async () => {
    const { batches, run, releaseAll } = recordingRun();
    const loader = batchLoader(run, { maxBatchSize: 2 });
    const answers = Promise.all([1, 2, 3].map((key) => loader.load(key)));
    await turn();
    releaseAll();
    await turn();
    releaseAll();
    expect(await answers).toEqual([10, 20, 30]);
    expect(batches).toEqual([[1, 2], [3]]);
  });
});
