import { type BatchLoader, batchLoader } from "@webhooks/core";
import type { RedisConnection } from "../redis.ts";
import { loadScript } from "./load-script.ts";

/**
 * The gate's Redis scripts (the `.lua` files beside this one, each opening with the keys and
 * arguments it takes and what it replies) and their typed calls. See
 * docs/architecture.md#the-gate for what they decide.
 * The files are read when a gate is made (load-script.ts).
 */

/** A turn not taken up this long after its time was lost: it lapses, and the reconciler wakes its delivery. */
export const LOST_TURN_MS = 10_000;

/**
 * rate_limit counts the starts in a window 100 ms longer than a second: an attempt reaches the
 * receiver some milliseconds after the gate lets it start, and that time varies, so with an exact
 * second two starts 1,000 ms apart could arrive 900 ms apart. The margin keeps the receiver's own
 * count per second at or below rate_limit, at the price of a sustained rate of rate_limit per 1.1 s.
 */
export const RATE_WINDOW_MS = 1_100;

/** A single wake-up moves at most this many deliveries out of a line (bounds one script's work). */
const MAX_WAKES = 50;

/** Calls of a batched script sent as one script run at most. */
const MAX_BATCH = 200;

/** One acquire call, in the order acquire.lua takes it. */
export type AcquireCall = [
  deliveryId: string,
  subscriptionId: string,
  origin: string,
  now: number,
  leaseMs: number,
  maxInFlight: number,
  originMaxInFlight: number,
  /** 0 for none. */
  rateLimit: number,
  /** 0 when not held. */
  heldUntil: number,
  circuitOpen: boolean,
  probeIntervalMs: number,
  disabled: boolean,
  slot: string,
  keepMs: number,
  test: boolean,
];

/** One release call, in the order release.lua takes it. */
export type ReleaseCall = [
  slot: string,
  subscriptionId: string,
  origin: string,
  now: number,
  maxInFlight: number,
  originMaxInFlight: number,
  /** 0 for none. */
  rateLimit: number,
  /** Held until then (epoch ms); 0: nothing holds it; -1: the caller cannot tell. */
  holdAt: number,
  leaseMs: number,
];

/** A batched call's reply, as the script's JSON gives it. */
export type ScriptReply = (string | number)[];

/** What precheck.lua answers. */
export type PrecheckResult = "go" | "joined" | "stays";
const PRECHECK_RESULTS: readonly PrecheckResult[] = ["go", "joined", "stays"];

interface GateCommands {
  gateAcquire(lines: string, ...args: (string | number)[]): Promise<string>;
  gateRelease(lines: string, ...args: (string | number)[]): Promise<string>;
  gateNudge(...args: (string | number)[]): Promise<string[] | null>;
  gateNudgeOrigin(...args: (string | number)[]): Promise<string[]>;
  gatePace(...args: (string | number)[]): Promise<number>;
  gatePrecheck(...args: (string | number)[]): Promise<number>;
}

/**
 * The gate's scripts on one connection, under one key prefix. Acquire and release calls made in
 * the same turn of the event loop go to Redis as one script run (their values as one JSON
 * argument): this runs up to twice per attempt, and a few arguments per batch cost the worker
 * and Redis much less to encode and parse than some fifteen per call.
 */
export class GateScripts {
  readonly #redis: RedisConnection & GateCommands;
  readonly #prefix: string;
  readonly #acquires: BatchLoader<AcquireCall, ScriptReply>;
  readonly #releases: BatchLoader<ReleaseCall, ScriptReply>;

  constructor(redis: RedisConnection, prefix: string) {
    redis.defineCommand("gateAcquire", { numberOfKeys: 1, lua: loadScript("acquire") });
    redis.defineCommand("gateRelease", { numberOfKeys: 1, lua: loadScript("release") });
    redis.defineCommand("gateNudge", { numberOfKeys: 1, lua: loadScript("nudge") });
    redis.defineCommand("gateNudgeOrigin", { numberOfKeys: 1, lua: loadScript("nudge_origin") });
    redis.defineCommand("gatePrecheck", { numberOfKeys: 7, lua: loadScript("precheck") });
    redis.defineCommand("gatePace", { numberOfKeys: 1, lua: loadScript("pace") });
    this.#redis = redis as RedisConnection & GateCommands;
    this.#prefix = prefix;
    // What every batched call shares: see includes/batch.lua.
    const batch = [`${prefix}lines`, prefix, LOST_TURN_MS, RATE_WINDOW_MS, MAX_WAKES] as const;
    this.#acquires = batchLoader(
      async (calls) => repliesOf(await this.#redis.gateAcquire(...batch, JSON.stringify(calls)), calls.length),
      { maxBatchSize: MAX_BATCH },
    );
    this.#releases = batchLoader(
      async (calls) => repliesOf(await this.#redis.gateRelease(...batch, JSON.stringify(calls)), calls.length),
      { maxBatchSize: MAX_BATCH },
    );
  }

  acquire(call: AcquireCall): Promise<ScriptReply> {
    return this.#acquires.load(call);
  }

  release(call: ReleaseCall): Promise<ScriptReply> {
    return this.#releases.load(call);
  }

  /** The deliveries to wake now (see nudge.lua). */
  async nudge(subscriptionId: string, resume: boolean, now: number): Promise<string[]> {
    const woken = await this.#redis.gateNudge(
      this.sharedKey("lines"),
      this.#prefix,
      subscriptionId,
      now,
      LOST_TURN_MS,
      resume ? 1 : 0,
    );
    return woken ?? [];
  }

  /** The deliveries to wake, `[id, at, id, at, ...]` (see nudge_origin.lua). */
  async nudgeOrigin(origin: string, now: number): Promise<string[]> {
    return this.#redis.gateNudgeOrigin(
      this.sharedKey("origin-lines"),
      this.#prefix,
      origin,
      now,
      LOST_TURN_MS,
      MAX_WAKES,
    );
  }

  async precheck(subscriptionId: string, deliveryId: string, now: number): Promise<PrecheckResult> {
    const reply = await this.#redis.gatePrecheck(
      this.key("in-flight", subscriptionId),
      this.key("line", subscriptionId),
      this.key("turn", subscriptionId),
      `${this.#prefix}lines`,
      this.key("cap", subscriptionId),
      this.key("disabled", subscriptionId),
      `${this.#prefix}lapsed`,
      deliveryId,
      now,
      LOST_TURN_MS,
      subscriptionId,
    );
    return PRECHECK_RESULTS[Number(reply)] ?? "go";
  }

  /** 0 when the request may leave now (it is counted), or how long to wait (ms). */
  async pace(subscriptionId: string, rateLimit: number, member: string, now: number): Promise<number> {
    return Number(await this.#redis.gatePace(this.key("sent", subscriptionId), now, rateLimit, member, RATE_WINDOW_MS));
  }

  /** A subscription's key of this kind (see docs/architecture.md#the-gate). */
  key(kind: string, subscriptionId: string): string {
    return `${this.#prefix}${kind}:${subscriptionId}`;
  }

  /** A key of the gate shared by every subscription (`lines`, `lapsed`) or origin (`origin-lines`). */
  sharedKey(name: "lines" | "lapsed" | "origin-lines"): string {
    return `${this.#prefix}${name}`;
  }
}

/** A batch's JSON reply, one array per call (Lua's JSON encoder writes an empty array as {}). */
function repliesOf(json: string, calls: number): ScriptReply[] {
  const replies: unknown = JSON.parse(json);
  if (!Array.isArray(replies) || replies.length !== calls)
    throw new Error(`the gate answered ${json.slice(0, 200)} for ${calls} calls`);
  return replies.map((reply) => (Array.isArray(reply) ? (reply as ScriptReply) : []));
}
