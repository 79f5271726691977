import DataLoader from "dataloader";
import { queueLayout, type QueueLayout } from "./queue-layout.ts";
import type { RedisConnection } from "./redis.ts";

/**
 * The gate in front of every attempt (contract §11): it decides, atomically across every worker
 * process, whether an attempt may start now or must wait, and it keeps the line of those waiting.
 *
 * Per subscription S, in Redis:
 * - in-flight:S      attempts under way (delivery id -> lease expiry), at most max_in_flight;
 * - in-flight origin the same per origin (scheme, host, port), at most ORIGIN_MAX_IN_FLIGHT;
 * - rate:S           the starts of the last RATE_WINDOW_MS, at most rate_limit (a sliding
 *                    window a little longer than a second, see below);
 * - probe:S          the one probe an open circuit lets through per interval;
 * - line:S           deliveries waiting, in the order they began to wait;
 * - turn:S           the deliveries whose turn it is (taken out of the line and woken, now
 *                    or at a known time); they count as taking room until they start.
 *
 * A delivery that must wait joins the line and its job leaves the worker slot (the worker parks
 * it as a delayed job). Deliveries are woken from the head of the line, as many as there is room
 * for, when they may start: when an attempt of S ends (a slot is free), when an attempt starts
 * and S still has room (so a backlog drains at the subscription's full allowance, in parallel),
 * or at a known time (the end of a Retry-After hold, the next probe of an open circuit, the
 * moment the rate window has room). No delivery polls. A wake that
 * gets lost (a worker killed between the decision and the wake) is recovered by `nudge`, which
 * the reconciler runs for every subscription with a line, and by the parked job's own long
 * fallback timer.
 *
 * The scripts name other subscriptions' keys themselves (the origin's line, and in release the
 * line and turn of another subscription, built inside the script from the key prefix). A Redis
 * Cluster refuses a script whose keys are on different slots, so on a cluster every gate key is
 * under one hash tag (`{<QUEUE_PREFIX>:gate}:`, see queue-layout.ts), and one node serves the gate.
 */

/**
 * A turn not taken up this long after its time was lost (the worker that gave it died before
 * waking the job): the line moves on. Forgetting a turn too early is harmless, since the caps are
 * checked when the delivery comes anyway; a turn only lets it go ahead of the line.
 */
const LOST_TURN_MS = 10_000;

/**
 * rate_limit counts the starts in a window 100 ms longer than a second: an attempt reaches the
 * receiver some milliseconds after the gate lets it start (the attempt is recorded first), and
 * that time varies, so with an exact second two starts 1,000 ms apart could arrive 900 ms apart.
 * The margin keeps the receiver's own count per second at or below rate_limit, at the price of
 * a sustained rate of rate_limit per 1.1 s.
 */
const RATE_WINDOW_MS = 1_100;

/** What the gate knows of a delivery's subscription, read with the claim (fresh each attempt). */
export interface GateInput {
  deliveryId: string;
  subscriptionId: string;
  origin: string;
  maxInFlight: number;
  originMaxInFlight: number;
  /** Attempts per second at most, or null. */
  rateLimit: number | null;
  /** Epoch ms until which the subscription is held (Retry-After, or an open circuit's next probe). */
  heldUntil: number | null;
  circuitOpen: boolean;
  probeIntervalMs: number;
  /** Disabled by the service (contract §11): its deliveries wait until it is enabled again. */
  disabled: boolean;
  /** How long the slot is kept if its holder never releases it (it died). */
  leaseMs: number;
}

export type GateWaitReason = "in_line" | "disabled" | "retry_after" | "circuit_open" | "max_in_flight" | "origin_max_in_flight" | "rate_limit";

/** A delivery to wake: run its job at `at` (epoch ms; now or later). */
export interface Wake {
  deliveryId: string;
  at: number;
}

export type GateDecision =
  | { go: true; probe: boolean; wakes: Wake[] }
  | { go: false; reason: GateWaitReason; wakes: Wake[] };

/** A single wake-up moves at most this many deliveries out of a line (bounds one script's work). */
const MAX_WAKES = 50;

const SHARED_LUA = `
-- Gives turns to the head of the line, as many as the subscription, its origin and its rate
-- window have room for now (pending turns count as taken); when only the rate window is full,
-- gives the head one turn for the moment it frees. Returns {id, at, id, at, ...}.
local function wake_room(line, turn, inflight, origin, rate, max_in_flight, origin_max, rate_limit, rate_window, now, max_wakes)
  local woken = {}
  local waiting = redis.call('ZCARD', line)
  if waiting == 0 then return woken end
  local pending = redis.call('ZCARD', turn)
  local room = math.min(max_in_flight - redis.call('ZCARD', inflight), origin_max - redis.call('ZCARD', origin)) - pending
  if room <= 0 then return woken end
  local at = now
  if rate_limit > 0 then
    redis.call('ZREMRANGEBYSCORE', rate, '-inf', now - rate_window)
    local rate_room = rate_limit - redis.call('ZCARD', rate) - pending
    if rate_room <= 0 then
      if pending > 0 then return woken end
      room = 1
      at = tonumber(redis.call('ZRANGE', rate, 0, 0, 'WITHSCORES')[2]) + rate_window
    else
      room = math.min(room, rate_room)
    end
  end
  local heads = redis.call('ZRANGE', line, 0, math.min(room, waiting, max_wakes) - 1)
  for _, head in ipairs(heads) do
    redis.call('ZREM', line, head)
    redis.call('ZADD', turn, at, head)
    table.insert(woken, head)
    table.insert(woken, tostring(at))
  end
  return woken
end
`;

// KEYS: in-flight:S, in-flight:origin, rate:S, line:S, turn:S, probe:S, origin-line, lines, cap:S
// ARGV: id, now, lease, max_in_flight, origin_max, rate_limit, held_until, circuit_open, probe_ms, subscription, disabled, lost_turn_ms, rate_window, max_wakes
const ACQUIRE_LUA = batched(`
local inflight, origin, rate, line, turn, probe, origin_line, lines = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local cap = KEYS[9]
local id, now, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local max_in_flight, origin_max, rate_limit = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local held_until, circuit_open, probe_ms = tonumber(ARGV[7]), ARGV[8] == '1', tonumber(ARGV[9])
local subscription, disabled, lost_turn_ms, rate_window, max_wakes = ARGV[10], ARGV[11] == '1', tonumber(ARGV[12]), tonumber(ARGV[13]), tonumber(ARGV[14])

redis.call('ZREMRANGEBYSCORE', inflight, '-inf', now)
redis.call('ZREMRANGEBYSCORE', origin, '-inf', now)
redis.call('ZREMRANGEBYSCORE', turn, '-inf', now - lost_turn_ms)
-- The cap as the subscription has it now, for the pre-check of deliveries not yet claimed.
redis.call('SET', cap, max_in_flight, 'PX', 3600000)

local my_turn = redis.call('ZREM', turn, id) == 1

-- Joins the line (at its front if it had the turn, so it keeps its place), and if the wait has a
-- known end and nobody holds the turn, gives the turn to the head of the line for that moment.
local function wait(reason, wait_ms)
  local score = now
  if my_turn then
    local head = redis.call('ZRANGE', line, 0, 0, 'WITHSCORES')
    if head[2] then score = tonumber(head[2]) - 1 end
  end
  redis.call('ZADD', line, 'NX', score, id)
  redis.call('SADD', lines, subscription)
  if reason == 'origin_max_in_flight' then redis.call('ZADD', origin_line, 'NX', now, subscription) end
  if wait_ms ~= nil and redis.call('ZCARD', turn) == 0 then
    local head = redis.call('ZRANGE', line, 0, 0)[1]
    local at = now + math.max(0, wait_ms)
    redis.call('ZREM', line, head)
    redis.call('ZADD', turn, at, head)
    return {0, reason, head, tostring(at)}
  end
  return {0, reason}
end

if not my_turn then
  if redis.call('ZSCORE', line, id) then
    -- Its own fallback timer fired: it may go only as the head of a line nobody holds the turn of.
    local head = redis.call('ZRANGE', line, 0, 0)[1]
    if head ~= id or redis.call('ZCARD', turn) > 0 then return {0, 'in_line'} end
    redis.call('ZREM', line, id)
  elseif redis.call('ZCARD', line) > 0 or redis.call('ZCARD', turn) > 0 then
    return wait('in_line', nil)
  end
end

if disabled then return wait('disabled', nil) end
if held_until > now then return wait(circuit_open and 'circuit_open' or 'retry_after', held_until - now) end
local is_probe = false
if circuit_open then
  if not redis.call('SET', probe, id, 'NX', 'PX', probe_ms) then
    return wait('circuit_open', redis.call('PTTL', probe))
  end
  is_probe = true
end
local blocked = nil
if redis.call('ZCARD', inflight) >= max_in_flight then blocked = 'max_in_flight'
elseif redis.call('ZCARD', origin) >= origin_max then blocked = 'origin_max_in_flight' end
local rate_wait = nil
if not blocked and rate_limit > 0 then
  redis.call('ZREMRANGEBYSCORE', rate, '-inf', now - rate_window)
  if redis.call('ZCARD', rate) >= rate_limit then
    blocked = 'rate_limit'
    rate_wait = tonumber(redis.call('ZRANGE', rate, 0, 0, 'WITHSCORES')[2]) + rate_window - now
  end
end
if blocked then
  if is_probe then redis.call('DEL', probe) end
  return wait(blocked, rate_wait)
end

redis.call('ZADD', inflight, now + lease, id)
redis.call('ZADD', origin, now + lease, id)
if rate_limit > 0 then
  redis.call('ZADD', rate, now, id .. '@' .. now)
  redis.call('PEXPIRE', rate, rate_window * 2)
end
-- A probe decides alone whether the rest may follow; otherwise pass the turn on while there is room.
if is_probe then return {1, '1'} end
local reply = {1, '0'}
for _, item in ipairs(wake_room(line, turn, inflight, origin, rate, max_in_flight, origin_max, rate_limit, rate_window, now, max_wakes)) do
  table.insert(reply, item)
end
return reply
`);

// KEYS: in-flight:S, in-flight:origin, rate:S, line:S, turn:S, origin-line
// ARGV: id, now, max_in_flight, origin_max, rate_limit, key prefix, lost_turn_ms, rate_window, max_wakes
const RELEASE_LUA = batched(`
local inflight, origin, rate, line, turn, origin_line = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local id, now = ARGV[1], tonumber(ARGV[2])
local max_in_flight, origin_max, rate_limit, prefix, lost_turn_ms, rate_window, max_wakes = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
redis.call('ZREM', inflight, id)
redis.call('ZREM', origin, id)
redis.call('ZREMRANGEBYSCORE', inflight, '-inf', now)
redis.call('ZREMRANGEBYSCORE', origin, '-inf', now)
redis.call('ZREMRANGEBYSCORE', turn, '-inf', now - lost_turn_ms)
local result = wake_room(line, turn, inflight, origin, rate, max_in_flight, origin_max, rate_limit, rate_window, now, max_wakes)
-- The origin has room again: give a turn to a subscription that waited for it.
if redis.call('ZCARD', origin) < origin_max then
  local other = redis.call('ZRANGE', origin_line, 0, 0)[1]
  if other then
    redis.call('ZREM', origin_line, other)
    local other_line, other_turn = prefix .. 'line:' .. other, prefix .. 'turn:' .. other
    redis.call('ZREMRANGEBYSCORE', other_turn, '-inf', now - lost_turn_ms)
    if redis.call('ZCARD', other_turn) == 0 then
      local head = redis.call('ZRANGE', other_line, 0, 0)[1]
      if head then
        redis.call('ZREM', other_line, head)
        redis.call('ZADD', other_turn, now, head)
        table.insert(result, head); table.insert(result, tostring(now))
      end
    end
  end
end
return result
`);

// KEYS: in-flight:S, line:S, turn:S, lines   ARGV: now, subscription, lost_turn_ms
const NUDGE_LUA = `
local inflight, line, turn, lines = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now, subscription, lost_turn_ms = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', inflight, '-inf', now)
redis.call('ZREMRANGEBYSCORE', turn, '-inf', now - lost_turn_ms)
if redis.call('ZCARD', line) == 0 then
  if redis.call('ZCARD', turn) == 0 then redis.call('SREM', lines, subscription) end
  return false
end
if redis.call('ZCARD', turn) > 0 or redis.call('ZCARD', inflight) > 0 then return false end
local head = redis.call('ZRANGE', line, 0, 0)[1]
redis.call('ZREM', line, head)
redis.call('ZADD', turn, now, head)
return head
`;

// KEYS: in-flight:S, line:S, turn:S, lines, cap:S   ARGV: id, now, lost_turn_ms, subscription
// 0: go on and claim (the gate decides after the claim); 1: it joined the line.
const PRECHECK_LUA = `
local inflight, line, turn, lines, cap = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local id, now, lost_turn_ms, subscription = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
redis.call('ZREMRANGEBYSCORE', turn, '-inf', now - lost_turn_ms)
if redis.call('ZSCORE', turn, id) or redis.call('ZSCORE', line, id) then return 0 end
local waits = redis.call('ZCARD', line) > 0 or redis.call('ZCARD', turn) > 0
if not waits then
  local max_in_flight = tonumber(redis.call('GET', cap) or '0')
  if max_in_flight > 0 then
    redis.call('ZREMRANGEBYSCORE', inflight, '-inf', now)
    waits = redis.call('ZCARD', inflight) >= max_in_flight
  end
end
if not waits then return 0 end
redis.call('ZADD', line, 'NX', now, id)
redis.call('SADD', lines, subscription)
return 1
`;

// KEYS: sent:S   ARGV: now, rate_limit, member, rate_window
const PACE_LUA = `
local sent, now, rate_limit, member, rate_window = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', sent, '-inf', now - rate_window)
if redis.call('ZCARD', sent) >= rate_limit then
  return tonumber(redis.call('ZRANGE', sent, 0, 0, 'WITHSCORES')[2]) + rate_window - now
end
redis.call('ZADD', sent, now, member)
redis.call('PEXPIRE', sent, rate_window * 2)
return 0
`;

/**
 * Runs a script's body once per call of a batch, inside one script: KEYS and ARGV hold the calls'
 * keys and arguments one after the other (ARGV[1] and ARGV[2] say how many of each a call has),
 * and the reply is the list of the calls' replies. The calls run in order and atomically, as if
 * made one after another. One round trip and one script run for the attempts a worker starts or
 * ends in the same turn of its event loop, instead of one each.
 */
function batched(body: string): string {
  return `${SHARED_LUA}
local function one(KEYS, ARGV)
${body}
end
local keys_per_call, args_per_call = tonumber(ARGV[1]), tonumber(ARGV[2])
local replies = {}
for i = 0, (#ARGV - 2) / args_per_call - 1 do
  local keys, args = {}, {}
  for j = 1, keys_per_call do keys[j] = KEYS[i * keys_per_call + j] end
  for j = 1, args_per_call do args[j] = ARGV[2 + i * args_per_call + j] end
  replies[i + 1] = one(keys, args)
end
return replies
`;
}

const MAX_BATCH = 200;

interface GateCommands {
  gateAcquire(...args: (string | number)[]): Promise<(string | number)[][]>;
  gateRelease(...args: (string | number)[]): Promise<string[][]>;
  gateNudge(...args: (string | number)[]): Promise<string | null>;
  gatePace(...args: (string | number)[]): Promise<number>;
  gatePrecheck(...args: (string | number)[]): Promise<number>;
}

export class DeliveryGate {
  readonly #redis: RedisConnection & GateCommands;
  readonly #prefix: string;
  readonly #acquires: DataLoader<ScriptCall, (string | number)[]>;
  readonly #releases: DataLoader<ScriptCall, (string | number)[]>;

  /**
   * `redis` should be a connection of its own: the gate's calls are many and small, and pipelined.
   * `layout` as a plain prefix: the single-node layout.
   */
  constructor(redis: RedisConnection, layout: QueueLayout | string) {
    this.#prefix = (typeof layout === "string" ? queueLayout(layout) : layout).gatePrefix;
    // Batched scripts: the first argument is the number of keys.
    redis.defineCommand("gateAcquire", { lua: ACQUIRE_LUA });
    redis.defineCommand("gateRelease", { lua: RELEASE_LUA });
    redis.defineCommand("gateNudge", { numberOfKeys: 4, lua: NUDGE_LUA });
    redis.defineCommand("gatePace", { numberOfKeys: 1, lua: PACE_LUA });
    redis.defineCommand("gatePrecheck", { numberOfKeys: 5, lua: PRECHECK_LUA });
    this.#redis = redis as RedisConnection & GateCommands;
    this.#acquires = batchOf((calls) => this.#redis.gateAcquire(...scriptArguments(calls)));
    this.#releases = batchOf((calls) => this.#redis.gateRelease(...scriptArguments(calls)));
  }

  async acquire(input: GateInput, now = Date.now()): Promise<GateDecision> {
    const reply = await this.#acquires.load({ keys: this.#acquireKeys(input), args: this.#acquireArgs(input, now) });
    const wakes = wakesFrom(reply.slice(2));
    if (Number(reply[0]) === 1) return { go: true, probe: reply[1] === "1", wakes };
    return { go: false, reason: String(reply[1]) as GateWaitReason, wakes };
  }

  #acquireKeys(input: GateInput): string[] {
    return [
      this.#key("in-flight", input.subscriptionId),
      this.#originKey(input.origin),
      this.#key("rate", input.subscriptionId),
      this.#key("line", input.subscriptionId),
      this.#key("turn", input.subscriptionId),
      this.#key("probe", input.subscriptionId),
      `${this.#prefix}origin-line:${input.origin}`,
      `${this.#prefix}lines`,
      this.#key("cap", input.subscriptionId),
    ];
  }

  #acquireArgs(input: GateInput, now: number): (string | number)[] {
    return [
      input.deliveryId,
      now,
      input.leaseMs,
      input.maxInFlight,
      input.originMaxInFlight,
      input.rateLimit ?? 0,
      input.heldUntil ?? 0,
      input.circuitOpen ? "1" : "0",
      input.probeIntervalMs,
      input.subscriptionId,
      input.disabled ? "1" : "0",
      LOST_TURN_MS,
      RATE_WINDOW_MS,
      MAX_WAKES,
    ];
  }

  /** The attempt ended: frees its slots and returns whom to wake. */
  async release(input: Pick<GateInput, "deliveryId" | "subscriptionId" | "origin" | "maxInFlight" | "originMaxInFlight" | "rateLimit">, now = Date.now()): Promise<Wake[]> {
    const reply = await this.#releases.load({
      keys: [
        this.#key("in-flight", input.subscriptionId),
        this.#originKey(input.origin),
        this.#key("rate", input.subscriptionId),
        this.#key("line", input.subscriptionId),
        this.#key("turn", input.subscriptionId),
        `${this.#prefix}origin-line:${input.origin}`,
      ],
      args: [input.deliveryId, now, input.maxInFlight, input.originMaxInFlight, input.rateLimit ?? 0, this.#prefix, LOST_TURN_MS, RATE_WINDOW_MS, MAX_WAKES],
    });
    return wakesFrom(reply);
  }

  /**
   * The last step before a rate-limited subscription's request leaves: admission counted starts,
   * but the time from start to send varies, so the sends themselves are counted too, over the
   * same 1.1 s window: the receiver's clock sees requests some tens of milliseconds apart from
   * when they left, and the margin keeps its own count per second at or below rate_limit.
   * Returns 0 when the request may leave now (and counts it), or how long to wait. Admission
   * keeps this wait rare and short.
   */
  async pace(subscriptionId: string, rateLimit: number, deliveryId: string, now = Date.now()): Promise<number> {
    return Number(await this.#redis.gatePace(this.#key("sent", subscriptionId), now, rateLimit, `${deliveryId}@${now}`, RATE_WINDOW_MS));
  }

  /**
   * Before the claim, for a job that names its subscription: when the subscription already has a
   * line (others wait ahead), or has as many attempts in flight as its cap was when last seen, the
   * delivery joins the line here and the worker parks its job without touching the database.
   * Otherwise (its turn came, or there may be room) it goes on to the claim, and `acquire`, with
   * the subscription's current limits, decides. Returns whether it joined the line.
   */
  async precheck(subscriptionId: string, deliveryId: string, now = Date.now()): Promise<boolean> {
    const joined = await this.#redis.gatePrecheck(
      this.#key("in-flight", subscriptionId),
      this.#key("line", subscriptionId),
      this.#key("turn", subscriptionId),
      `${this.#prefix}lines`,
      this.#key("cap", subscriptionId),
      deliveryId,
      now,
      LOST_TURN_MS,
      subscriptionId,
    );
    return Number(joined) === 1;
  }

  /** When the delivery's turn is (epoch ms), if it has been given one. */
  async turnOf(subscriptionId: string, deliveryId: string): Promise<number | null> {
    const score = await this.#redis.zscore(this.#key("turn", subscriptionId), deliveryId);
    return score === null ? null : Number(score);
  }

  /**
   * The safety net for lost wakes, run by the reconciler: every subscription with a line and
   * nothing under way (no attempt in flight, no turn pending) gets its head woken. Work is per
   * subscription with a line, not per waiting delivery.
   */
  async nudgeAll(now = Date.now()): Promise<Wake[]> {
    const wakes: Wake[] = [];
    let cursor = "0";
    do {
      const [next, subscriptions] = await this.#redis.sscan(`${this.#prefix}lines`, cursor, "COUNT", 500);
      cursor = next;
      for (const subscriptionId of subscriptions) {
        const head = await this.#redis.gateNudge(
          this.#key("in-flight", subscriptionId),
          this.#key("line", subscriptionId),
          this.#key("turn", subscriptionId),
          `${this.#prefix}lines`,
          now,
          subscriptionId,
          LOST_TURN_MS,
        );
        if (head) wakes.push({ deliveryId: head, at: now });
      }
    } while (cursor !== "0");
    return wakes;
  }

  /** Deliveries waiting in a subscription's line (for metrics and tests). */
  async lineLength(subscriptionId: string): Promise<number> {
    return this.#redis.zcard(this.#key("line", subscriptionId));
  }

  #key(kind: string, subscriptionId: string): string {
    return `${this.#prefix}${kind}:${subscriptionId}`;
  }

  #originKey(origin: string): string {
    return `${this.#prefix}in-flight-origin:${origin}`;
  }
}

/** One call of a batched script: its keys and its arguments. */
interface ScriptCall {
  keys: string[];
  args: (string | number)[];
}

/** The calls made in the same turn of the event loop, sent as one script run (see `batched`). */
function batchOf<T>(run: (calls: readonly ScriptCall[]) => Promise<T[]>): DataLoader<ScriptCall, T> {
  return new DataLoader<ScriptCall, T>(run, { cache: false, maxBatchSize: MAX_BATCH, batchScheduleFn: (flush) => setImmediate(flush) });
}

/** numkeys, the keys, then how many keys and arguments each call has, then the arguments. */
function scriptArguments(calls: readonly ScriptCall[]): (string | number)[] {
  const first = calls[0]!;
  return [calls.length * first.keys.length, ...calls.flatMap((call) => call.keys), first.keys.length, first.args.length, ...calls.flatMap((call) => call.args)];
}

function wakesFrom(flat: (string | number)[]): Wake[] {
  const wakes: Wake[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) wakes.push({ deliveryId: String(flat[i]), at: Number(flat[i + 1]) });
  return wakes;
}
