import { randomBytes } from "node:crypto";
import type { GateInput } from "./delivery-gate.ts";

/**
 * The slots at the gate that a worker process keeps for its next attempts (see "held slot" in
 * docs/architecture.md#the-gate). Each is an entry of the subscription's (and its origin's) in-flight sets in
 * Redis, taken by an attempt through Redis as usual and kept, when that attempt ends, for the
 * next attempt of the same subscription in this process, for a short while. Every other process
 * counts it as taken all along: keeping a slot never lets more than the caps run. This class is
 * the process's own bookkeeping of them.
 */
export interface HeldSlot {
  /** The in-flight entry's name in Redis. */
  member: string;
  subscriptionId: string;
  /** The limits the slot was taken under: an attempt under other limits goes to Redis. */
  origin: string;
  maxInFlight: number;
  originMaxInFlight: number;
  leaseMs: number;
  /**
   * No attempt starts on the slot after this (epoch ms): the entry outlives it by a lease, which
   * covers the last attempt started on it. Null when the slot may not be kept: someone waited
   * for the subscription, or it or its origin was near its cap, when it was taken, or the
   * subscription has had to wait since.
   */
  keptUntil: number | null;
}

/** How an attempt that ended leaves the gate. */
export type SlotExit =
  /** Its slot stays with the process for the next attempt: nothing to tell Redis. */
  | { kept: true }
  /** Release this in-flight entry in Redis. */
  | { kept: false; member: string };

/**
 * Whether an attempt may run on a kept slot: only one the gate would let through at once on the
 * in-flight counts alone. A rate limit counts every start in Redis; a held, disabled or
 * open-circuit subscription waits or probes there; a delivery that waited in line has its turn
 * to take out of Redis; a test goes ahead of the line there.
 */
export function mayKeepSlots(input: GateInput, now: number): boolean {
  return (
    input.rateLimit === null &&
    !input.circuitOpen &&
    !input.disabled &&
    (input.heldUntil ?? 0) <= now &&
    input.waited !== true &&
    input.test !== true
  );
}

export class HeldSlots {
  /** Slots no attempt runs on now, per subscription. */
  readonly #free = new Map<string, HeldSlot[]>();
  /** The slot each attempt under way runs on, by delivery id. */
  readonly #inUse = new Map<string, HeldSlot>();
  /** Makes the names of slots unique: a delivery's next attempt must not reuse its entry while this one is kept. */
  readonly #token = randomBytes(6).toString("hex");
  #taken = 0;
  /** Slots the process has, in use or kept free, per subscription and per origin. */
  readonly #bySubscription = new Map<string, number>();
  readonly #byOrigin = new Map<string, number>();

  /** Starts the attempt on a kept slot of its subscription, when there is one it may use. */
  take(input: GateInput, now: number): boolean {
    const free = this.#free.get(input.subscriptionId);
    if (!free || !mayKeepSlots(input, now)) return false;
    const index = free.findIndex((slot) => slot.keptUntil !== null && slot.keptUntil > now && sameLimits(slot, input));
    if (index < 0) return false;
    const [slot] = free.splice(index, 1);
    if (free.length === 0) this.#free.delete(input.subscriptionId);
    this.#inUse.set(input.deliveryId, slot!);
    return true;
  }

  /** A name for the in-flight entry of an attempt about to go through Redis. */
  nextMember(): string {
    return `${this.#token}:${++this.#taken}`;
  }

  /** The attempt got its slot through Redis; `keptUntil` is null when it may not be kept. */
  started(input: GateInput, member: string, keptUntil: number | null): void {
    const { subscriptionId, origin, maxInFlight, originMaxInFlight, leaseMs } = input;
    this.#inUse.set(input.deliveryId, {
      member,
      subscriptionId,
      origin,
      maxInFlight,
      originMaxInFlight,
      leaseMs,
      keptUntil,
    });
    count(this.#bySubscription, subscriptionId, 1);
    count(this.#byOrigin, origin, 1);
  }

  /**
   * The attempt ended. Its slot stays with the process when it may be kept, `keep` allows (the
   * attempt's outcome does not hold the subscription), it is not past its time, and the process
   * does not have more than three quarters of the subscription's or the origin's cap (a free slot
   * the process keeps near a cap would make its own next attempts wait); otherwise the entry to
   * release in Redis.
   */
  end(deliveryId: string, keep: boolean, now: number): SlotExit {
    const slot = this.#inUse.get(deliveryId);
    if (!slot) return { kept: false, member: deliveryId };
    this.#inUse.delete(deliveryId);
    const roomy =
      (this.#bySubscription.get(slot.subscriptionId) ?? 0) * 4 <= slot.maxInFlight * 3 &&
      (this.#byOrigin.get(slot.origin) ?? 0) * 4 <= slot.originMaxInFlight * 3;
    if (!keep || !roomy || slot.keptUntil === null || slot.keptUntil <= now) {
      this.#forget(slot);
      return { kept: false, member: slot.member };
    }
    const free = this.#free.get(slot.subscriptionId);
    if (free) free.push(slot);
    else this.#free.set(slot.subscriptionId, [slot]);
    return { kept: true };
  }

  /**
   * Stops keeping the subscription's slots (it must wait): the free ones, which the caller
   * releases in Redis, and those in use, released when their attempts end.
   */
  giveUp(subscriptionId: string): HeldSlot[] {
    const free = this.#free.get(subscriptionId) ?? [];
    this.#free.delete(subscriptionId);
    for (const slot of this.#inUse.values()) if (slot.subscriptionId === subscriptionId) slot.keptUntil = null;
    return this.#forgetAll(free);
  }

  /** Stops keeping the free slots of every subscription of the origin (it is full): the caller releases them. */
  giveUpOrigin(origin: string): HeldSlot[] {
    const given: HeldSlot[] = [];
    for (const [subscriptionId, free] of this.#free) {
      if (!free.some((slot) => slot.origin === origin)) continue;
      given.push(...free.filter((slot) => slot.origin === origin));
      const rest = free.filter((slot) => slot.origin !== origin);
      if (rest.length > 0) this.#free.set(subscriptionId, rest);
      else this.#free.delete(subscriptionId);
    }
    return this.#forgetAll(given);
  }

  /** The free slots past their time (every free slot, with `now` infinite): the caller releases them. */
  giveUpExpired(now: number): HeldSlot[] {
    const expired: HeldSlot[] = [];
    const usable = (slot: HeldSlot) => slot.keptUntil !== null && slot.keptUntil > now;
    for (const [subscriptionId, free] of this.#free) {
      // Runs before every acquire that goes to Redis: lists with nothing expired are left as they are.
      if (free.every(usable)) continue;
      expired.push(...free.filter((slot) => !usable(slot)));
      const keep = free.filter(usable);
      if (keep.length > 0) this.#free.set(subscriptionId, keep);
      else this.#free.delete(subscriptionId);
    }
    return this.#forgetAll(expired);
  }

  /** Whether any slot is kept free. */
  get holding(): boolean {
    return this.#free.size > 0;
  }

  /** The slot leaves the process (its entry is released in Redis). */
  #forget(slot: HeldSlot): void {
    count(this.#bySubscription, slot.subscriptionId, -1);
    count(this.#byOrigin, slot.origin, -1);
  }

  #forgetAll(slots: HeldSlot[]): HeldSlot[] {
    for (const slot of slots) this.#forget(slot);
    return slots;
  }
}

function count(counts: Map<string, number>, key: string, delta: number): void {
  const value = (counts.get(key) ?? 0) + delta;
  if (value > 0) counts.set(key, value);
  else counts.delete(key);
}

function sameLimits(slot: HeldSlot, input: GateInput): boolean {
  return (
    slot.origin === input.origin &&
    slot.maxInFlight === input.maxInFlight &&
    slot.originMaxInFlight === input.originMaxInFlight &&
    slot.leaseMs === input.leaseMs
  );
}
