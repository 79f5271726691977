import { randomBytes } from "node:crypto";
import type { GateInput } from "./delivery-gate.ts";

/**
 * Room at the gate that one worker process holds for a subscription for a short while, so that
 * the attempts it starts and ends meanwhile need no call to Redis (see "Held room" in
 * delivery-gate.ts). Each slot of the room is an entry of the subscription's (and its origin's)
 * in-flight sets in Redis, named by the process, so every other process counts it as taken: a
 * held room never lets more than max_in_flight attempts run. This class is the process's own
 * bookkeeping of those entries: which are free, which an attempt runs on.
 */
export interface HeldRoom {
  subscriptionId: string;
  /** The limits the room was taken under: an attempt under other limits goes to Redis. */
  origin: string;
  maxInFlight: number;
  originMaxInFlight: number;
  leaseMs: number;
  /** No attempt starts on the room after this (epoch ms); its free slots are then given back. */
  until: number;
  /** The entries no attempt runs on now. */
  free: string[];
}

/** How an attempt that ended leaves the gate. */
export type RoomExit =
  /** It ran on a held slot, which stays with the process for its next attempt: nothing to tell Redis. */
  | { kept: true }
  /** Release this in-flight entry in Redis: the attempt's own, or a held slot the process no longer holds. */
  | { kept: false; member: string };

/**
 * Whether an attempt may run on held room: only one the gate would let through at once on the
 * in-flight counts alone. A rate limit counts every start in Redis; a held, disabled or
 * open-circuit subscription waits or probes there; a delivery that waited in line has its turn
 * to take out of Redis.
 */
export function mayUseHeldRoom(input: GateInput, now: number): boolean {
  return input.rateLimit === null && !input.circuitOpen && !input.disabled && (input.heldUntil ?? 0) <= now && input.waited !== true;
}

export class HeldRooms {
  readonly #rooms = new Map<string, HeldRoom>();
  /** Attempts running on a held slot: delivery id -> its room and slot. */
  readonly #onRoom = new Map<string, { room: HeldRoom; member: string }>();
  /** Attempts of each subscription this process has at the gate or under way. */
  readonly #running = new Map<string, number>();
  /** Subscriptions for which a call asking for room is on its way to Redis. */
  readonly #asking = new Set<string>();
  /** Makes the names of held slots unique across processes. */
  readonly #token = randomBytes(6).toString("hex");
  #roomsMade = 0;

  /** Starts the attempt on a free slot of the subscription's room, when it has one and may use it. */
  take(input: GateInput, now: number): boolean {
    const room = this.#rooms.get(input.subscriptionId);
    if (!room || room.until <= now || !sameLimits(room, input) || !mayUseHeldRoom(input, now)) return false;
    const member = room.free.pop();
    if (member === undefined) return false;
    this.#onRoom.set(input.deliveryId, { room, member });
    this.#count(input.subscriptionId, 1);
    return true;
  }

  /** An attempt came to the gate through Redis (it ends with `end`, or `left` if it did not start). */
  arrived(subscriptionId: string): void {
    this.#count(subscriptionId, 1);
  }

  /** An attempt that came through Redis did not start (it waits, or the call failed). */
  left(subscriptionId: string): void {
    this.#count(subscriptionId, -1);
  }

  /**
   * How much room to ask Redis to hold for the subscription along with an attempt: as many slots
   * as the process has other attempts of it at the gate or under way, plus one, so a process
   * that is busy with a subscription keeps about its own share. Redis grants at most half of the
   * room that is left (see ACQUIRE_LUA), and none while anyone waits. Nothing when the process
   * holds valid room already (the attempt goes to Redis only because the room is all in use), or
   * when another attempt's call is asking already. Call `answered` once Redis has replied.
   */
  wanted(input: GateInput, now: number): number {
    const { subscriptionId } = input;
    const room = this.#rooms.get(subscriptionId);
    if ((room && room.until > now && sameLimits(room, input)) || this.#asking.has(subscriptionId) || !mayUseHeldRoom(input, now)) return 0;
    this.#asking.add(subscriptionId);
    return (this.#running.get(subscriptionId) ?? 0) + 1;
  }

  answered(subscriptionId: string): void {
    this.#asking.delete(subscriptionId);
  }

  /** A unique base for the names of the slots of a room about to be asked for. */
  nextBase(): string {
    return `held:${this.#token}:${++this.#roomsMade}:`;
  }

  /** Redis granted room: the process holds it until `until`. Returns the room it replaces, if any. */
  add(room: HeldRoom): HeldRoom | undefined {
    const replaced = this.#rooms.get(room.subscriptionId);
    this.#rooms.set(room.subscriptionId, room);
    return replaced;
  }

  /**
   * The attempt ended. Its slot stays with the process when it ran on held room that is still
   * valid and `keep` allows (the attempt's outcome does not hold the subscription); otherwise the
   * entry to release in Redis.
   */
  end(deliveryId: string, subscriptionId: string, keep: boolean, now: number): RoomExit {
    this.#count(subscriptionId, -1);
    const onRoom = this.#onRoom.get(deliveryId);
    if (!onRoom) return { kept: false, member: deliveryId };
    this.#onRoom.delete(deliveryId);
    const { room, member } = onRoom;
    if (keep && this.#rooms.get(subscriptionId) === room && room.until > now) {
      room.free.push(member);
      return { kept: true };
    }
    return { kept: false, member };
  }

  /** Stops holding the subscription's room: the caller gives its free slots back in Redis. */
  retire(subscriptionId: string): HeldRoom | undefined {
    const room = this.#rooms.get(subscriptionId);
    this.#rooms.delete(subscriptionId);
    return room;
  }

  /** The rooms past their time (or all, at shutdown), no longer held: the caller gives their free slots back. */
  retireExpired(now: number): HeldRoom[] {
    const expired = [...this.#rooms.values()].filter((room) => room.until <= now);
    for (const room of expired) this.#rooms.delete(room.subscriptionId);
    return expired;
  }

  get size(): number {
    return this.#rooms.size;
  }

  #count(subscriptionId: string, delta: number): void {
    const count = (this.#running.get(subscriptionId) ?? 0) + delta;
    if (count > 0) this.#running.set(subscriptionId, count);
    else this.#running.delete(subscriptionId);
  }
}

function sameLimits(room: HeldRoom, input: GateInput): boolean {
  return room.origin === input.origin && room.maxInFlight === input.maxInFlight && room.originMaxInFlight === input.originMaxInFlight && room.leaseMs === input.leaseMs;
}
