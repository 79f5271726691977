import type { Logger } from "@webhooks/core";
import { type QueueLayout, queueLayout } from "../queue-layout.ts";
import type { RedisConnection } from "../redis.ts";
import { type HeldSlot, HeldSlots, mayKeepSlots } from "./held-slots.ts";
import type { GateLimits } from "./limits.ts";
import { GateScripts, type PrecheckResult, type ScriptReply } from "./scripts.ts";

/**
 * The gate in front of every attempt: it decides, atomically across every worker process,
 * whether an attempt may start now or must wait, and keeps the lines of those waiting. The
 * decisions are Redis scripts (scripts.ts); this class batches their calls, keeps a worker
 * process's held slots, and turns the replies into wakes. The words (line, turn, place, hold,
 * lapse, park, held slot) are defined in docs/architecture.md#the-gate.
 */

/** Reconciler passes wake at most this many deliveries whose turn lapsed; more wait for the next pass. */
const MAX_LAPSED_WAKES = 1_000;

/** What the gate knows of a delivery's subscription, read with the claim (fresh each attempt). */
export interface GateInput extends GateLimits {
  deliveryId: string;
  /** Epoch ms until which the subscription is held (Retry-After, or an open circuit's next probe). */
  heldUntil: number | null;
  circuitOpen: boolean;
  probeIntervalMs: number;
  /** Disabled by the service: its deliveries wait until it is enabled again. */
  disabled: boolean;
  /** How long the slot is kept if its holder never releases it (it died). */
  leaseMs: number;
  /** The delivery waited at the gate before: it leaves the line through Redis, where its turn is. */
  waited?: boolean;
  /**
   * A test event's delivery: it goes ahead of the line, and past a disabled subscription, but
   * not past a hold, and it takes a slot within the caps and the rate limit (when none is free it
   * waits at the head of the line). With the circuit open it goes as the probe (see `probeNow`).
   * docs/api.md#send-a-test-event.
   */
  test?: boolean;
}

/** Held slots: how long a process may keep a slot, and how it wakes deliveries when it releases kept ones. */
export interface HeldSlotsOptions {
  holdSlotsMs: number;
  wake(wakes: Wake[]): Promise<void>;
  logger: Logger;
}

export type { PrecheckResult };

export type GateWaitReason =
  | "in_line"
  | "disabled"
  | "retry_after"
  | "circuit_open"
  | "max_in_flight"
  | "origin_max_in_flight"
  | "rate_limit";

/** A delivery to wake: run its job at `at` (epoch ms; now or later). */
export interface Wake {
  deliveryId: string;
  at: number;
}

export type GateDecision =
  | { go: true; probe: boolean; wakes: Wake[] }
  | { go: false; reason: GateWaitReason; wakes: Wake[] };

/** What a release needs: the slot's limits, and what the attempt's outcome says of a hold (see `release`). */
export type ReleaseInput = GateLimits & Pick<GateInput, "deliveryId" | "leaseMs"> & { holdUntil?: number | null };

export class DeliveryGate {
  readonly #redis: RedisConnection;
  readonly #scripts: GateScripts;
  /** Held slots, in a worker process; without them, every call goes to Redis. */
  readonly #held: (HeldSlotsOptions & { slots: HeldSlots }) | undefined;
  #giveBackTimer: NodeJS.Timeout | undefined;

  /**
   * `redis` should be a connection of its own: the gate's calls are many and small, and pipelined.
   * `layout` as a plain prefix: the single-node layout. `heldSlots`: a worker process's gate keeps
   * slots for its next attempts (call `close` at shutdown, to release them).
   */
  constructor(redis: RedisConnection, layout: QueueLayout | string, heldSlots?: HeldSlotsOptions) {
    this.#held = heldSlots && { ...heldSlots, slots: new HeldSlots() };
    this.#scripts = new GateScripts(redis, (typeof layout === "string" ? queueLayout(layout) : layout).gatePrefix);
    this.#redis = redis;
  }

  async acquire(input: GateInput, now = Date.now()): Promise<GateDecision> {
    const held = this.#held;
    if (held?.slots.take(input, now)) return { go: true, probe: false, wakes: [] };
    const keepMs = held && mayKeepSlots(input, now) ? held.holdSlotsMs : 0;
    const slot = held ? held.slots.nextMember() : input.deliveryId;
    // Free slots past their time, which the timer has not released yet, go first: still counted in
    // Redis, they could make this attempt wait for nothing.
    if (held) void this.#giveBack(held.slots.giveUpExpired(now));
    const reply = await this.#scripts.acquire([
      input.deliveryId,
      input.subscriptionId,
      input.origin,
      now,
      input.leaseMs,
      input.maxInFlight,
      input.originMaxInFlight,
      input.rateLimit ?? 0,
      input.heldUntil ?? 0,
      input.circuitOpen,
      input.probeIntervalMs,
      input.disabled,
      slot,
      keepMs,
      input.test === true,
    ]);
    if (Number(reply[0]) === 1) {
      held?.slots.started(input, slot, Number(reply[2]) === 1 ? now + keepMs : null);
      return { go: true, probe: reply[1] === "1", wakes: wakesFrom(reply.slice(3)) };
    }
    // It must wait: slots this process keeps for its subscription go back, to whoever is first in
    // line (for every subscription of the origin, when the origin is full).
    void this.#giveBack(held?.slots.giveUp(input.subscriptionId));
    if (reply[1] === "origin_max_in_flight") void this.#giveBack(held?.slots.giveUpOrigin(input.origin));
    return { go: false, reason: String(reply[1]) as GateWaitReason, wakes: wakesFrom(reply.slice(2)) };
  }

  /**
   * The attempt ended: frees its slot (or keeps it for the process's next attempt) and returns
   * whom to wake. `holdUntil` is what the attempt's outcome says of the subscription now: until
   * when its own health write held it (epoch ms), or null when nothing holds it (its health write
   * said so, or it succeeded); undefined when it cannot tell (the gate then goes by the hold it
   * knows). The claim's snapshot must not be passed: it predates the attempt.
   */
  async release(input: ReleaseInput, now = Date.now()): Promise<Wake[]> {
    const holds = input.holdUntil != null && input.holdUntil > now;
    const exit = this.#held?.slots.end(input.deliveryId, !holds, now) ?? { kept: false, member: input.deliveryId };
    if (exit.kept) {
      this.#startGivingBack();
      return [];
    }
    // Its outcome holds the subscription: the slots the process keeps for it go back (they would
    // only let attempts be claimed and taken back), telling the gate of the hold too: their
    // releases run before this one's, and would otherwise wake the line just before the hold is known.
    if (holds) void this.#giveBack(this.#held?.slots.giveUp(input.subscriptionId), input.holdUntil!);
    return this.#releaseSlot(exit.member, input, input.holdUntil, now);
  }

  /** Releases every slot the process keeps (at shutdown: another process may need them). */
  async close(): Promise<void> {
    clearInterval(this.#giveBackTimer);
    this.#giveBackTimer = undefined;
    await this.#giveBack(this.#held?.slots.giveUpExpired(Number.POSITIVE_INFINITY));
  }

  /** A timer releases kept slots past their time, so that a process that goes idle does not keep them. */
  #startGivingBack(): void {
    const held = this.#held!;
    this.#giveBackTimer ??= setInterval(() => {
      void this.#giveBack(held.slots.giveUpExpired(Date.now()));
      if (!held.slots.holding) {
        clearInterval(this.#giveBackTimer);
        this.#giveBackTimer = undefined;
      }
    }, held.holdSlotsMs / 2).unref();
  }

  /**
   * Releases kept slots like attempts that ended (their outcome unknown: a hold the gate knows
   * stands; or, given, the hold an attempt's outcome just set), and wakes whom they make room for.
   */
  async #giveBack(slots: HeldSlot[] | undefined, holdUntil?: number): Promise<void> {
    const held = this.#held;
    if (!held || !slots || slots.length === 0) return;
    const now = Date.now();
    try {
      const wakes = await Promise.all(
        slots.map((slot) => this.#releaseSlot(slot.member, { ...slot, rateLimit: null }, holdUntil, now)),
      );
      await held.wake(wakes.flat());
    } catch (error) {
      held.logger.warn(
        { err: error, slots: slots.length },
        "could not release the slots kept at the gate; they expire with their lease",
      );
    }
  }

  /** Releases one in-flight entry in Redis; returns whom to wake. */
  async #releaseSlot(
    slot: string,
    limits: GateLimits & Pick<GateInput, "leaseMs">,
    holdUntil: number | null | undefined,
    now: number,
  ): Promise<Wake[]> {
    const reply = await this.#scripts.release([
      slot,
      limits.subscriptionId,
      limits.origin,
      now,
      limits.maxInFlight,
      limits.originMaxInFlight,
      limits.rateLimit ?? 0,
      holdUntil === undefined ? -1 : (holdUntil ?? 0),
      limits.leaseMs,
    ]);
    return wakesFrom(reply);
  }

  /**
   * The last step before a rate-limited subscription's request leaves (see pace.lua). Returns 0
   * when the request may leave now (and counts it), or how long to wait. Admission keeps this
   * wait rare and short.
   */
  async pace(subscriptionId: string, rateLimit: number, deliveryId: string, now = Date.now()): Promise<number> {
    return this.#scripts.pace(subscriptionId, rateLimit, `${deliveryId}@${now}`, now);
  }

  /**
   * Before the claim, for a job that names its subscription (see precheck.lua): `go` (claim it),
   * `joined` (it joined the line) or `stays` (it was in line already, and stays).
   */
  async precheck(subscriptionId: string, deliveryId: string, now = Date.now()): Promise<PrecheckResult> {
    return this.#scripts.precheck(subscriptionId, deliveryId, now);
  }

  /** When the delivery's turn is (epoch ms), if it has been given one. */
  async turnOf(subscriptionId: string, deliveryId: string): Promise<number | null> {
    const score = await this.#redis.zscore(this.#scripts.key("turn", subscriptionId), deliveryId);
    return score === null ? null : Number(score);
  }

  /**
   * Where the delivery is at the gate: its turn (epoch ms), if it has been given one, and whether
   * it waits in the subscription's line. Neither, for a delivery that just joined the line: Redis
   * lost the gate's keys since (or its turn was taken up meanwhile).
   */
  async placeOf(subscriptionId: string, deliveryId: string): Promise<{ turn: number | null; inLine: boolean }> {
    const [turn, inLine] = await Promise.all([
      this.turnOf(subscriptionId, deliveryId),
      this.#redis.zscore(this.#scripts.key("line", subscriptionId), deliveryId),
    ]);
    return { turn, inLine: inLine !== null };
  }

  /**
   * The safety net for lost wakes, run by the reconciler: every subscription with a line and
   * nothing under way (no attempt in flight, no turn pending), not known to be disabled and not
   * waiting in an origin's line, gets its head woken; every origin with a line gives its room;
   * and the deliveries whose turn lapsed are woken. Work is per line, not per waiting delivery.
   * `wake` runs the wakes (the queue's); returns them.
   */
  async nudgeAll(wake: (wakes: Wake[]) => Promise<void>, now = Date.now()): Promise<Wake[]> {
    const wakes: Wake[] = [];
    let cursor = "0";
    do {
      const [next, subscriptions] = await this.#redis.sscan(this.#scripts.sharedKey("lines"), cursor, "COUNT", 500);
      cursor = next;
      for (const subscriptionId of subscriptions) wakes.push(...(await this.#nudge(subscriptionId, false, now)));
    } while (cursor !== "0");
    // Origins' lines: their room goes to whoever waits for it, should no attempt at the origin end
    // to give it (the slots of a worker that died expire, and lost turns lapse, without a call).
    do {
      const [next, entries] = await this.#redis.hscan(this.#scripts.sharedKey("origin-lines"), cursor, "COUNT", 500);
      cursor = next;
      for (let i = 0; i < entries.length; i += 2)
        wakes.push(...wakesFrom(await this.#scripts.nudgeOrigin(entries[i]!, now)));
    } while (cursor !== "0");
    // Lapsed turns leave the set only once woken, so that a wake that fails, or a reconciler that
    // dies meanwhile, leaves them to the next pass rather than to their jobs' fallback timers. Two
    // reconcilers at once may wake one twice, and a delivery may have ended meanwhile: such a job
    // finds nothing to do.
    const lapsedKey = this.#scripts.sharedKey("lapsed");
    const lapsed = await this.#redis.srandmember(lapsedKey, MAX_LAPSED_WAKES);
    for (const deliveryId of lapsed) wakes.push({ deliveryId, at: now });
    await wake(wakes);
    if (lapsed.length > 0) await this.#redis.srem(lapsedKey, ...lapsed);
    return wakes;
  }

  /**
   * The subscription was enabled again (or its circuit closed by hand): what the gate remembers
   * of it being disabled or held goes, and the head of its line, if any, is woken now rather than
   * by the next nudge; so are deliveries whose turn was for the end of the hold just lifted.
   * Returns the wakes (for the caller to run).
   */
  async resume(subscriptionId: string, now = Date.now()): Promise<Wake[]> {
    return this.#nudge(subscriptionId, true, now);
  }

  /**
   * The subscription's limits changed (PUT): the head of its line is woken, as many as the new
   * limits have room for now, rather than only when one of its attempts ends (a hanging
   * receiver's, a whole DELIVERY_TIMEOUT later). A hold the gate knows of stands. The cap the
   * pre-check compares with is the new one from now on. Returns the wakes (for the caller to run).
   */
  async resize(limits: GateLimits, now = Date.now()): Promise<Wake[]> {
    await this.#redis.set(this.#scripts.key("cap", limits.subscriptionId), limits.maxInFlight, "KEEPTTL", "XX");
    // A release of a slot nobody holds: it frees nothing, and wakes whom the limits make room for.
    // (The lease only bounds a hold the release sets, and this one sets none.)
    return this.#releaseSlot(`resize:${limits.subscriptionId}`, { ...limits, leaseMs: 0 }, undefined, now);
  }

  async #nudge(subscriptionId: string, resume: boolean, now: number): Promise<Wake[]> {
    const woken = await this.#scripts.nudge(subscriptionId, resume, now);
    return woken.map((deliveryId) => ({ deliveryId, at: now }));
  }

  /**
   * An explicit action (a manual resend, a recover, a test event) on a subscription whose circuit
   * is open, whose next probe the API has just brought forward in PostgreSQL to `at` (now, or the
   * end of a Retry-After): this delivery goes then as the probe. The probe key and the hold the gate remembers go, and the delivery leaves
   * the line for a turn now (should it have to wait again, it goes back to the line's head).
   * Returns the wake (for the caller to run). A success closes the circuit and the line drains;
   * a failure holds the line until the next probe, as any probe's does.
   */
  async probeNow(subscriptionId: string, deliveryId: string, at: number): Promise<Wake[]> {
    const key = (kind: string) => this.#scripts.key(kind, subscriptionId);
    await this.#redis
      .multi()
      .del(key("probe"), key("hold"))
      .zrem(key("line"), deliveryId)
      .zadd(key("turn"), at, deliveryId)
      .sadd(this.#scripts.sharedKey("lines"), subscriptionId)
      .exec();
    return [{ deliveryId, at }];
  }

  /** Deliveries waiting in a subscription's line (for metrics and tests). */
  async lineLength(subscriptionId: string): Promise<number> {
    return this.#redis.zcard(this.#scripts.key("line", subscriptionId));
  }
}

function wakesFrom(flat: ScriptReply): Wake[] {
  const wakes: Wake[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) wakes.push({ deliveryId: String(flat[i]), at: Number(flat[i + 1]) });
  return wakes;
}
