import { type BatchLoader, batchLoader, type Logger } from "@webhooks/core";
import { type HeldSlot, HeldSlots, mayKeepSlots } from "./held-slots.ts";
import { type QueueLayout, queueLayout } from "./queue-layout.ts";
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
 *                    or at a known time); they count as taking room until they start;
 * - place:S          the place in the line (its score) of each delivery given a turn, so that
 *                    one that must wait again goes back where it was: turn holders sent back
 *                    together (a hold began while they were on their way) keep their order,
 *                    where each going to the front would reverse it. Entries go when their turn
 *                    is taken; those of lapsed turns, when S's next turns are given;
 * - hold:S           until when S is held (an open circuit's next probe, a Retry-After), as
 *                    the last attempt or claim to see its health left it: while it lasts, an
 *                    attempt that ends wakes nobody of S's line (each would be claimed only to
 *                    be taken back); the head has the turn for its end. It is a hint, kept at
 *                    most a lease long: what it saves is the claims of the attempts in flight
 *                    when the hold began, which all end within a lease, and a hint that
 *                    outlived a hold PostgreSQL has already lifted only slows the line.
 * - lapsed           deliveries whose turn lapsed untaken (their wake was lost), for the
 *                    reconciler to wake (one set for all subscriptions);
 * - disabled:S       S was found disabled (contract §11) by an attempt's claim: while it is
 *                    there, nobody of S's line is claimed (the nudge and the pre-check leave
 *                    the line alone, see DISABLED_RECHECK_MS). Enabling S again removes it
 *                    (`resume`, called by the API).
 *
 * A delivery that must wait joins the line and its job leaves the worker slot (the worker parks
 * it as a delayed job). Deliveries are woken from the head of the line, as many as there is room
 * for, when they may start: when an attempt of S ends (a slot is free), when an attempt starts
 * and S still has room (so a backlog drains at the subscription's full allowance, in parallel),
 * or at a known time (the end of a Retry-After hold, the next probe of an open circuit, the
 * moment the rate window has room). No delivery polls. A wake that gets lost (a worker killed
 * between the decision and the wake, or Redis failing the wake) leaves a turn nobody takes up: it
 * lapses into the lapsed set, and the reconciler's `nudgeAll` wakes those deliveries and the
 * head of every line with nothing under way. The parked job's own long fallback timer is the
 * last resort.
 *
 * Held slots. Asking Redis before and after every attempt was most of what the gate cost when
 * nobody waits (~10% of the CPU per delivery of a fan-out workload, measured). So in a worker
 * process, an attempt that got its slot while nobody waited for S, and while S and its origin had
 * a quarter of their caps to spare, leaves the slot, when it ends, to the process's next attempt
 * of S, for `holdSlotsMs` (200 ms in the worker) from when the slot was taken; that attempt starts
 * and ends without calling Redis. Not while the process itself has more than three quarters of
 * either cap: its own next attempt would find the cap full. A slot kept free past its time is
 * released like any attempt's, by a timer, waking the line. Kept slots are in-flight entries like
 * any other, so the caps hold exactly, and their entries outlive the last attempt that may start
 * on them by a lease, so a process that dies leaves them to expire as it does the slots of its
 * attempts. The process releases the slots it keeps for S at once when one of S's deliveries must
 * wait (every one it keeps on the origin, when the origin is full), or an attempt's outcome holds
 * S. What it costs: another process that finds S full while a process keeps a free slot of it
 * waits for that slot at most `holdSlotsMs`; and only attempts that would go at once on the
 * counts alone use kept slots (no rate limit, hold, open circuit or disabled subscription, and
 * not a delivery with a turn to take up, see held-slots.ts).
 *
 * The acquire and release scripts build their keys themselves from the key prefix (their own
 * subscription's and origin's, and in release the line and turn of another subscription waiting
 * for the origin). A Redis Cluster refuses a script whose keys are on different slots, so on a
 * cluster every gate key is under one hash tag (`{<QUEUE_PREFIX>:gate}:`, see queue-layout.ts),
 * and one node serves the gate.
 */

/**
 * A turn not taken up this long after its time was lost (the worker that gave it died before
 * waking the job): the line moves on, and the delivery is woken again by the reconciler (see
 * LAPSE_LUA). Lapsing a turn too early is harmless, since the caps are checked when the delivery
 * comes anyway; a turn only lets it go ahead of the line.
 */
const LOST_TURN_MS = 10_000;

/**
 * How long a claim that found S disabled keeps S's line from being claimed again. Without it, the
 * reconciler's nudge would wake the head every pass (10 s), each wake a claim taken back at once,
 * for as long as S stays disabled, which can be for good. The API lifts it when S is enabled
 * again; should that call fail, the line moves again at most this long after.
 */
const DISABLED_RECHECK_MS = 5 * 60_000;

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
  /** The delivery waited at the gate before: it leaves the line through Redis, where its turn is. */
  waited?: boolean;
  /**
   * A test event's delivery (POST /v1/subscriptions/{id}/test, contract §12: sent whatever the
   * subscription's state). It goes ahead of the line, and past a disabled subscription, a hold
   * and an open circuit: its owner asked for this one request, often to check a mended endpoint
   * before enabling it again. It still takes a slot, within max_in_flight, the origin's cap and
   * the rate limit; when none is free it waits at the head of the line.
   */
  test?: boolean;
}

/** Held slots (see above): how long a process may keep a slot, and how it wakes deliveries when it releases kept ones. */
export interface HeldSlotsOptions {
  holdSlotsMs: number;
  wake(wakes: Wake[]): Promise<void>;
  logger: Logger;
}

/** What the pre-check found (see `precheck`). */
export type PrecheckResult = "go" | "joined" | "stays";
const PRECHECK_RESULTS: readonly PrecheckResult[] = ["go", "joined", "stays"];

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

/** A single wake-up moves at most this many deliveries out of a line (bounds one script's work). */
const MAX_WAKES = 50;

/** Lapsed turns woken per reconciler pass; more wait for the next pass. */
const MAX_LAPSED_WAKES = 1_000;

// A script that includes it defines `lapsed`, the lapsed set's key, before it.
const LAPSE_LUA = `
-- Turns not taken up lost_turn_ms after their time: the wake that should have brought the
-- delivery was lost (its waker died between the decision and the wake, or Redis failed that
-- call). They leave the turns, so that the line moves on, for the lapsed set, whose deliveries the
-- reconciler wakes on its next pass (nudgeAll): without it, each would wait for its parked job's
-- fallback timer.
local function lapse(turn, now, lost_turn_ms)
  local gone = redis.call('ZRANGEBYSCORE', turn, '-inf', now - lost_turn_ms)
  for _, id in ipairs(gone) do
    redis.call('SADD', lapsed, id)
    redis.call('ZREM', turn, id)
  end
end
`;

// The rule for a delivery found already in its line (its parked job's fallback timer fired): the
// acquire and the pre-check must agree on it, or a delivery the pre-check lets through would be
// claimed only to be taken back.
const LEAVE_LINE_LUA = `
-- It may leave the line for an attempt only as the head of a line nobody holds a turn of: anyone
-- else would jump the line, or take a turn's room.
local function may_leave_line(line, turn, id)
  return redis.call('ZRANGE', line, 0, 0)[1] == id and redis.call('ZCARD', turn) == 0
end
`;

const SHARED_LUA = `${LAPSE_LUA}${LEAVE_LINE_LUA}
-- Takes the first n of the line out of it, for turns at the time at, each with its place kept
-- (see place:S). With no turn pending, the places left are those of lapsed turns: they go first.
local function take_turns(line, turn, place, at, n)
  if redis.call('ZCARD', turn) == 0 then redis.call('DEL', place) end
  local heads = redis.call('ZRANGE', line, 0, n - 1, 'WITHSCORES')
  local taken = {}
  for i = 1, #heads, 2 do
    local head = heads[i]
    redis.call('ZREM', line, head)
    redis.call('ZADD', turn, at, head)
    redis.call('HSET', place, head, heads[i + 1])
    table.insert(taken, head)
  end
  return taken
end

-- Gives the head of the line the turn for the time at, unless a turn of the line is pending (turns
-- lost lapse first). Returns the head, or nil when nobody got it.
local function give_turn(line, turn, place, at, now, lost_turn_ms)
  lapse(turn, now, lost_turn_ms)
  if redis.call('ZCARD', turn) > 0 then return nil end
  return take_turns(line, turn, place, at, 1)[1]
end

-- Gives turns to the head of the line, as many as the subscription, its origin and its rate
-- window have room for now (pending turns count as taken); when only the rate window is full,
-- gives the head one turn for the moment it frees. Nobody while the subscription is held, unless
-- the caller knows from the database that it is not (known_free), when the hold is forgotten.
-- Returns {id, at, id, at, ...}.
local function wake_room(line, turn, place, inflight, origin, rate, max_in_flight, origin_max, rate_limit, rate_window, now, max_wakes, lost_turn_ms, hold, known_free)
  local woken = {}
  -- Forgotten even when nobody waits: a hold left behind would make newcomers wait in line.
  if known_free then redis.call('DEL', hold) end
  local waiting = redis.call('ZCARD', line)
  if waiting == 0 then return woken end
  if not known_free and tonumber(redis.call('GET', hold) or '0') > now then
    return woken
  end
  -- Room is counted without the slots of holders that died and the turns that were lost.
  redis.call('ZREMRANGEBYSCORE', inflight, '-inf', now)
  redis.call('ZREMRANGEBYSCORE', origin, '-inf', now)
  lapse(turn, now, lost_turn_ms)
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
  for _, head in ipairs(take_turns(line, turn, place, at, math.min(room, waiting, max_wakes))) do
    table.insert(woken, head)
    table.insert(woken, tostring(at))
  end
  return woken
end
`;

// call: id, subscription, origin, now, lease, max_in_flight, origin_max, rate_limit, held_until, circuit_open (0/1), probe_ms, disabled (0/1),
//       the slot's name in the in-flight sets, how long the process may keep the slot (ms, 0: not at all), test (0/1, see GateInput)
// Replies {0, reason, wakes...} or {1, probe (0/1), keep (0/1), wakes...}.
const ACQUIRE_LUA = batched(`
local id, subscription, origin_name, now, lease = call[1], call[2], call[3], call[4], call[5]
local max_in_flight, origin_max, rate_limit, held_until = call[6], call[7], call[8], call[9]
local circuit_open, probe_ms, disabled = call[10] == 1, call[11], call[12] == 1
local slot, keep_ms, test = call[13], call[14], call[15] == 1
local inflight, origin, origin_line = prefix .. 'in-flight:' .. subscription, prefix .. 'in-flight-origin:' .. origin_name, prefix .. 'origin-line:' .. origin_name
local rate, line, turn = prefix .. 'rate:' .. subscription, prefix .. 'line:' .. subscription, prefix .. 'turn:' .. subscription
local probe, cap, hold = prefix .. 'probe:' .. subscription, prefix .. 'cap:' .. subscription, prefix .. 'hold:' .. subscription
local disabled_mark, place = prefix .. 'disabled:' .. subscription, prefix .. 'place:' .. subscription

-- This script runs before every attempt, so its common case (nobody waiting, room to spare)
-- is kept to a few calls: sweeps of expired entries happen only where they could change the
-- decision (a set that looks full, a line being woken, turns that exist).

-- Turns not taken up in time lapse; then, is it this delivery's turn?
local my_turn = false
-- Where it was in the line when given its turn, should it have to go back (see place:S).
local my_place = nil
local turns = redis.call('ZCARD', turn)
if turns > 0 then
  lapse(turn, now, lost_turn_ms)
  my_turn = redis.call('ZREM', turn, id) == 1
  turns = redis.call('ZCARD', turn)
  if my_turn then
    my_place = tonumber(redis.call('HGET', place, id))
    redis.call('HDEL', place, id)
  end
end

-- Whether an in-flight set holds its limit of live attempts: the slots of holders that died (their
-- lease expired) are swept only when the set looks full.
local function full(set, limit)
  if redis.call('ZCARD', set) < limit then return false end
  redis.call('ZREMRANGEBYSCORE', set, '-inf', now)
  return redis.call('ZCARD', set) >= limit
end

-- Whether it leaves the head of the line to try: if it must wait again, it goes back there.
local was_head = my_turn

-- A test goes ahead of the line (see GateInput.test): out of it if it was in it, and back at its
-- head if it must wait.
if test and not my_turn then
  redis.call('ZREM', line, id)
  was_head = true
end

-- Joins the line (back at its place if it had the turn, at its front if it was the head, so it
-- keeps its place), and if the wait has a known end and nobody holds the turn, gives the turn to
-- the head of the line for that moment. Also leaves the subscription's cap as it is now for the
-- pre-check, which only the deliveries of a subscription seen waiting go through.
local function wait(reason, wait_ms)
  redis.call('SET', cap, max_in_flight, 'PX', 3600000)
  local score = now
  if my_place then
    score = my_place
  elseif was_head then
    local head = redis.call('ZRANGE', line, 0, 0, 'WITHSCORES')
    if head[2] then score = tonumber(head[2]) - 1 end
  end
  redis.call('ZADD', line, 'NX', score, id)
  redis.call('SADD', lines, subscription)
  if reason == 'origin_max_in_flight' then redis.call('ZADD', origin_line, 'NX', now, subscription) end
  if wait_ms ~= nil then
    local at = now + math.max(0, wait_ms)
    local head = give_turn(line, turn, place, at, now, lost_turn_ms)
    if head then return {0, reason, head, tostring(at)} end
  end
  return {0, reason}
end

if not my_turn and not test then
  if redis.call('ZSCORE', line, id) then
    -- Its own fallback timer fired.
    if not may_leave_line(line, turn, id) then return {0, 'in_line'} end
    redis.call('ZREM', line, id)
    was_head = true
  elseif redis.call('ZCARD', line) > 0 or (turns > 0 and (rate_limit > 0 or tonumber(redis.call('GET', hold) or '0') > now)) then
    -- The claim just read S enabled: a mark left from when it was disabled no longer holds the line
    -- (the nudge wakes it), should the API's call that lifts it have failed.
    if not disabled then redis.call('DEL', disabled_mark) end
    return wait('in_line', nil)
  end
end
-- Deliveries woken from the line and on their way (turns) keep the room they were given: a
-- newcomer finding only turns pending, and room beside them, goes at once. If it joined the line
-- instead, at a steady rate some newcomer would always find a turn pending, and the line, once
-- formed, would never empty while the subscription is far from its cap: every delivery would be
-- parked and woken. It still waits in line when a turn is pending for the end of a hold the gate
-- knows of (its claim may have read the subscription before the hold), and for a rate-limited
-- subscription, whose turns hold room in the rate window too, which a newcomer does not see here.
local room_taken = my_turn and 0 or turns

if disabled then
  redis.call('SET', disabled_mark, 1, 'PX', ${DISABLED_RECHECK_MS})
  return wait('disabled', nil)
end
if held_until > now and not test then
  -- So that the attempts of S that end meanwhile wake nobody (see wake_room).
  redis.call('SET', hold, held_until, 'PX', math.min(held_until - now, lease))
  return wait(circuit_open and 'circuit_open' or 'retry_after', held_until - now)
end
local is_probe = false
if circuit_open and not test then
  if not redis.call('SET', probe, id, 'NX', 'PX', math.max(1, probe_ms)) then
    return wait('circuit_open', redis.call('PTTL', probe))
  end
  is_probe = true
end
local blocked = nil
if full(inflight, max_in_flight - room_taken) then blocked = 'max_in_flight'
elseif full(origin, origin_max) then blocked = 'origin_max_in_flight' end
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

-- A slot the process may keep is used for keep_ms more (see "Held slots"): its entry outlives the
-- last attempt that may start on it by a lease.
redis.call('ZADD', inflight, now + keep_ms + lease, slot)
redis.call('ZADD', origin, now + keep_ms + lease, slot)
if rate_limit > 0 then
  redis.call('ZADD', rate, now, id .. '@' .. now)
  redis.call('PEXPIRE', rate, rate_window * 2)
end
-- A probe decides alone whether the rest may follow; otherwise pass the turn on while there is room.
if is_probe then return {1, '1', 0} end
-- A test went past what may still hold the others (a disabled subscription, a hold, an open
-- circuit): its start says nothing of whether they may go.
if test then return {1, '0', 0} end
local reply = {1, '0', 0}
-- The claim read S's health just now, and nothing holds it: a hold left in Redis is over.
local woken = wake_room(line, turn, place, inflight, origin, rate, max_in_flight, origin_max, rate_limit, rate_window, now, max_wakes, lost_turn_ms, hold, true)
for _, item in ipairs(woken) do table.insert(reply, item) end
-- The process may keep the slot for its next attempts only while nobody waits for S, and while S
-- and its origin have a quarter of their caps to spare: a kept slot sits free between two
-- attempts, and near a cap that would make others wait.
local function roomy(set, limit) return redis.call('ZCARD', set) * 4 <= limit * 3 end
if keep_ms > 0 and #woken == 0 and redis.call('ZCARD', line) == 0 and redis.call('ZCARD', turn) == 0 and roomy(inflight, max_in_flight) and roomy(origin, origin_max) then
  reply[3] = 1
end
return reply
`);

// call: id, subscription, origin, now, max_in_flight, origin_max, rate_limit, hold_at (see release()), lease
const RELEASE_LUA = batched(`
local id, subscription, origin_name, now = call[1], call[2], call[3], call[4]
local max_in_flight, origin_max, rate_limit, hold_at, lease = call[5], call[6], call[7], call[8], call[9]
local inflight, origin, origin_line = prefix .. 'in-flight:' .. subscription, prefix .. 'in-flight-origin:' .. origin_name, prefix .. 'origin-line:' .. origin_name
local rate, line, turn, hold = prefix .. 'rate:' .. subscription, prefix .. 'line:' .. subscription, prefix .. 'turn:' .. subscription, prefix .. 'hold:' .. subscription
local place = prefix .. 'place:' .. subscription
redis.call('ZREM', inflight, id)
redis.call('ZREM', origin, id)
-- The slots of holders that died go too, so that a set never full (and never swept by acquire)
-- does not keep them.
redis.call('ZREMRANGEBYSCORE', inflight, '-inf', now)
redis.call('ZREMRANGEBYSCORE', origin, '-inf', now)
local result
if hold_at > now then
  -- This attempt's own health write held S (its circuit opened, or the receiver sent Retry-After):
  -- the slot it freed wakes nobody, and the head of the line gets the turn for the hold's end.
  redis.call('SET', hold, hold_at, 'PX', math.min(hold_at - now, lease))
  local head = give_turn(line, turn, place, hold_at, now, lost_turn_ms)
  result = head and {head, tostring(hold_at)} or {}
else
  -- 0 (or a time past): its outcome says nothing holds S now (it succeeded, or a probe closed the
  -- circuit), and a hold the gate kept is forgotten; -1: it cannot tell, the kept hold stands.
  result = wake_room(line, turn, place, inflight, origin, rate, max_in_flight, origin_max, rate_limit, rate_window, now, max_wakes, lost_turn_ms, hold, hold_at >= 0)
end
-- The origin has room again: give a turn to a subscription that waited for it.
local other = redis.call('ZRANGE', origin_line, 0, 0)[1]
if other and redis.call('ZCARD', origin) < origin_max then
  redis.call('ZREM', origin_line, other)
  local head = give_turn(prefix .. 'line:' .. other, prefix .. 'turn:' .. other, prefix .. 'place:' .. other, now, now, lost_turn_ms)
  if head then table.insert(result, head); table.insert(result, tostring(now)) end
end
return result
`);

// KEYS: in-flight:S, line:S, turn:S, lines, disabled:S, hold:S, lapsed, place:S
// ARGV: now, subscription, lost_turn_ms, resume (1: S was just enabled again, lift its disabled mark and hold first)
// Replies the deliveries to wake now, or nil.
const NUDGE_LUA = `
local inflight, line, turn, lines, disabled_mark, hold, lapsed, place = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local now, subscription, lost_turn_ms, resume = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[4] == '1'
${SHARED_LUA}
if resume then
  redis.call('DEL', disabled_mark, hold)
  -- Turns given for the end of the hold just lifted (a Retry-After, an open circuit's next
  -- probe) are now: left at their time, they would keep the line waiting for it, newcomers
  -- included, up to MAX_RETRY_AFTER after the API said the deliveries go at once.
  local held = redis.call('ZRANGEBYSCORE', turn, '(' .. now, '+inf')
  if #held > 0 then
    for _, id in ipairs(held) do redis.call('ZADD', turn, now, id) end
    return held
  end
end
redis.call('ZREMRANGEBYSCORE', inflight, '-inf', now)
lapse(turn, now, lost_turn_ms)
if redis.call('ZCARD', line) == 0 then
  if redis.call('ZCARD', turn) == 0 then redis.call('SREM', lines, subscription) end
  return false
end
if redis.call('EXISTS', disabled_mark) == 1 then return false end
if redis.call('ZCARD', turn) > 0 or redis.call('ZCARD', inflight) > 0 then return false end
-- The head gets the turn, its place kept (see place:S).
return take_turns(line, turn, place, now, 1)
`;

// KEYS: in-flight:S, line:S, turn:S, lines, cap:S, disabled:S, lapsed   ARGV: id, now, lost_turn_ms, subscription
// 0: go on and claim (the gate decides after the claim); 1: it joined the line; 2: it was in line already, and stays.
const PRECHECK_LUA = `
local inflight, line, turn, lines, cap, disabled_mark, lapsed = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local id, now, lost_turn_ms, subscription = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
${LAPSE_LUA}${LEAVE_LINE_LUA}
lapse(turn, now, lost_turn_ms)
if redis.call('ZSCORE', turn, id) then return 0 end
local disabled = redis.call('EXISTS', disabled_mark) == 1
if redis.call('ZSCORE', line, id) then
  -- Its job's fallback timer fired while it waits in line. It goes on to the claim only where
  -- ACQUIRE_LUA would let it out. Anyone else stays parked here, without a claim taken back: a
  -- line of a million deliveries behind an open circuit would otherwise cost a million claims per
  -- fallback period.
  if disabled or not may_leave_line(line, turn, id) then return 2 end
  return 0
end
-- Turns pending take room but do not make a newcomer wait (see ACQUIRE_LUA).
local waits = disabled or redis.call('ZCARD', line) > 0
if not waits then
  local max_in_flight = tonumber(redis.call('GET', cap) or '0')
  if max_in_flight > 0 then
    redis.call('ZREMRANGEBYSCORE', inflight, '-inf', now)
    waits = redis.call('ZCARD', inflight) + redis.call('ZCARD', turn) >= max_in_flight
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
 * Runs a script's body once per call of a batch, inside one script, and returns the calls'
 * replies as one JSON array. The calls run in order and atomically, as if made one after
 * another: one round trip and one script run for the attempts a worker starts or ends in the same
 * turn of its event loop, instead of one each.
 *
 * The calls travel as one JSON argument (ARGV[5], an array of each call's values) and the body
 * builds its keys from the prefix: this runs up to twice per attempt, and a few arguments per batch
 * cost the worker and Redis much less to encode and parse than some twenty per call. The one key
 * declared, the set of subscriptions with a line, routes the script on a Redis Cluster, where
 * every gate key is under the same hash tag and so on the same node (see queue-layout.ts).
 * ARGV: key prefix, lost_turn_ms, rate_window, max_wakes, the calls.
 */
function batched(body: string): string {
  return `
local lines = KEYS[1]
local prefix, lost_turn_ms, rate_window, max_wakes = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local lapsed = prefix .. 'lapsed'
${SHARED_LUA}
local function one(call)
${body}
end
local replies = {}
for i, call in ipairs(cjson.decode(ARGV[5])) do replies[i] = one(call) end
return cjson.encode(replies)
`;
}

const MAX_BATCH = 200;

interface GateCommands {
  gateAcquire(...args: (string | number)[]): Promise<string>;
  gateRelease(...args: (string | number)[]): Promise<string>;
  gateNudge(...args: (string | number)[]): Promise<string[] | null>;
  gatePace(...args: (string | number)[]): Promise<number>;
  gatePrecheck(...args: (string | number)[]): Promise<number>;
}

export class DeliveryGate {
  readonly #redis: RedisConnection & GateCommands;
  readonly #prefix: string;
  readonly #acquires: BatchLoader<ScriptCall, (string | number)[]>;
  readonly #releases: BatchLoader<ScriptCall, (string | number)[]>;
  /** What every batched call shares (see `batched`): the declared key, then ARGV[1..4]. */
  readonly #batchArguments: (string | number)[];
  /** Held slots, in a worker process (see above); without them, every call goes to Redis. */
  readonly #held: (HeldSlotsOptions & { slots: HeldSlots }) | undefined;
  #giveBackTimer: NodeJS.Timeout | undefined;

  /**
   * `redis` should be a connection of its own: the gate's calls are many and small, and pipelined.
   * `layout` as a plain prefix: the single-node layout. `heldSlots`: a worker process's gate keeps
   * slots for its next attempts (call `close` at shutdown, to release them).
   */
  constructor(redis: RedisConnection, layout: QueueLayout | string, heldSlots?: HeldSlotsOptions) {
    this.#held = heldSlots && { ...heldSlots, slots: new HeldSlots() };
    this.#prefix = (typeof layout === "string" ? queueLayout(layout) : layout).gatePrefix;
    // Batched scripts: the first argument is the number of keys.
    redis.defineCommand("gateAcquire", { lua: ACQUIRE_LUA });
    redis.defineCommand("gateRelease", { lua: RELEASE_LUA });
    redis.defineCommand("gateNudge", { numberOfKeys: 8, lua: NUDGE_LUA });
    redis.defineCommand("gatePace", { numberOfKeys: 1, lua: PACE_LUA });
    redis.defineCommand("gatePrecheck", { numberOfKeys: 7, lua: PRECHECK_LUA });
    this.#redis = redis as RedisConnection & GateCommands;
    this.#batchArguments = [1, `${this.#prefix}lines`, this.#prefix, LOST_TURN_MS, RATE_WINDOW_MS, MAX_WAKES];
    this.#acquires = batchOf(async (calls) =>
      repliesOf(await this.#redis.gateAcquire(...this.#batchArguments, JSON.stringify(calls)), calls.length),
    );
    this.#releases = batchOf(async (calls) =>
      repliesOf(await this.#redis.gateRelease(...this.#batchArguments, JSON.stringify(calls)), calls.length),
    );
  }

  async acquire(input: GateInput, now = Date.now()): Promise<GateDecision> {
    const held = this.#held;
    if (held?.slots.take(input, now)) return { go: true, probe: false, wakes: [] };
    const keepMs = held && mayKeepSlots(input, now) ? held.holdSlotsMs : 0;
    const member = held ? held.slots.nextMember() : input.deliveryId;
    // Free slots past their time, which the timer has not released yet, go first: still counted in
    // Redis, they could make this attempt wait for nothing. Both scripts share a connection, and
    // the release's batch runs first unless an acquire batch of this turn was already scheduled
    // (then this attempt may wait, as it would without this, until the slot's release wakes it).
    if (held) void this.#giveBack(held.slots.giveUpExpired(now));
    // In the order ACQUIRE_LUA reads them.
    const reply = await this.#acquires.load([
      input.deliveryId,
      input.subscriptionId,
      input.origin,
      now,
      input.leaseMs,
      input.maxInFlight,
      input.originMaxInFlight,
      input.rateLimit ?? 0,
      input.heldUntil ?? 0,
      input.circuitOpen ? 1 : 0,
      input.probeIntervalMs,
      input.disabled ? 1 : 0,
      member,
      keepMs,
      input.test ? 1 : 0,
    ]);
    if (Number(reply[0]) === 1) {
      held?.slots.started(input, member, Number(reply[2]) === 1 ? now + keepMs : null);
      return { go: true, probe: reply[1] === "1", wakes: wakesFrom(reply.slice(3)) };
    }
    // S must wait: slots this process keeps for it go back, to whoever is first in line (for
    // every subscription of the origin, when the origin is full).
    void this.#giveBack(held?.slots.giveUp(input.subscriptionId));
    if (reply[1] === "origin_max_in_flight") void this.#giveBack(held?.slots.giveUpOrigin(input.origin));
    return { go: false, reason: String(reply[1]) as GateWaitReason, wakes: wakesFrom(reply.slice(2)) };
  }

  /**
   * The attempt ended: frees its slot (or keeps it for the process's next attempt, see "Held
   * slots") and returns whom to wake. `holdUntil` is what the attempt's outcome says of the
   * subscription now: until when its own health write held it (epoch ms), or null when nothing
   * holds it (its health write said so, or it succeeded); undefined when it cannot tell (the
   * gate then goes by the hold it knows). The claim's snapshot must not be passed: it predates
   * the attempt.
   */
  async release(
    input: Pick<
      GateInput,
      "deliveryId" | "subscriptionId" | "origin" | "maxInFlight" | "originMaxInFlight" | "rateLimit" | "leaseMs"
    > & { holdUntil?: number | null },
    now = Date.now(),
  ): Promise<Wake[]> {
    const holds = input.holdUntil != null && input.holdUntil > now;
    const exit = this.#held?.slots.end(input.deliveryId, !holds, now) ?? { kept: false, member: input.deliveryId };
    if (exit.kept) {
      this.#startGivingBack();
      return [];
    }
    // Its outcome holds S: the slots the process keeps for S go back (they would only let
    // attempts be claimed and taken back), telling the gate of the hold too: their releases run
    // before this one's, and would otherwise wake the line just before the hold is known.
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
    member: string,
    limits: Pick<
      GateInput,
      "subscriptionId" | "origin" | "maxInFlight" | "originMaxInFlight" | "rateLimit" | "leaseMs"
    >,
    holdUntil: number | null | undefined,
    now: number,
  ): Promise<Wake[]> {
    // In the order RELEASE_LUA reads them.
    const reply = await this.#releases.load([
      member,
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
   * The last step before a rate-limited subscription's request leaves: admission counted starts,
   * but the time from start to send varies, so the sends themselves are counted too, over the
   * same 1.1 s window: the receiver's clock sees requests some tens of milliseconds apart from
   * when they left, and the margin keeps its own count per second at or below rate_limit.
   * Returns 0 when the request may leave now (and counts it), or how long to wait. Admission
   * keeps this wait rare and short.
   */
  async pace(subscriptionId: string, rateLimit: number, deliveryId: string, now = Date.now()): Promise<number> {
    return Number(
      await this.#redis.gatePace(
        this.#key("sent", subscriptionId),
        now,
        rateLimit,
        `${deliveryId}@${now}`,
        RATE_WINDOW_MS,
      ),
    );
  }

  /**
   * Before the claim, for a job that names its subscription: when the subscription already has a
   * line (others wait ahead), has as many attempts in flight and turns pending as its cap was
   * when last seen, or was last found disabled, the delivery joins the line here and the worker
   * parks its job without touching the database. A delivery already in line (its job's fallback
   * timer fired) stays there unless it is the head and nobody holds a turn.
   * Otherwise (its turn came, or there may be room) it goes on to the claim, and `acquire`, with
   * the subscription's current limits, decides. Returns `go` (claim it), `joined` (it joined the
   * line) or `stays` (it was in line already, and stays).
   */
  async precheck(subscriptionId: string, deliveryId: string, now = Date.now()): Promise<PrecheckResult> {
    const reply = await this.#redis.gatePrecheck(
      this.#key("in-flight", subscriptionId),
      this.#key("line", subscriptionId),
      this.#key("turn", subscriptionId),
      `${this.#prefix}lines`,
      this.#key("cap", subscriptionId),
      this.#key("disabled", subscriptionId),
      `${this.#prefix}lapsed`,
      deliveryId,
      now,
      LOST_TURN_MS,
      subscriptionId,
    );
    return PRECHECK_RESULTS[Number(reply)] ?? "go";
  }

  /** When the delivery's turn is (epoch ms), if it has been given one. */
  async turnOf(subscriptionId: string, deliveryId: string): Promise<number | null> {
    const score = await this.#redis.zscore(this.#key("turn", subscriptionId), deliveryId);
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
      this.#redis.zscore(this.#key("line", subscriptionId), deliveryId),
    ]);
    return { turn, inLine: inLine !== null };
  }

  /**
   * The safety net for lost wakes, run by the reconciler: every subscription with a line and
   * nothing under way (no attempt in flight, no turn pending), and not known to be disabled, gets
   * its head woken. Work is per subscription with a line, not per waiting delivery. `wake` runs
   * the wakes (the queue's); returns them.
   */
  async nudgeAll(wake: (wakes: Wake[]) => Promise<void>, now = Date.now()): Promise<Wake[]> {
    const wakes: Wake[] = [];
    let cursor = "0";
    do {
      const [next, subscriptions] = await this.#redis.sscan(`${this.#prefix}lines`, cursor, "COUNT", 500);
      cursor = next;
      for (const subscriptionId of subscriptions) wakes.push(...(await this.#nudge(subscriptionId, false, now)));
    } while (cursor !== "0");
    // Deliveries whose turn lapsed (see LAPSE_LUA): their wake was lost; this is it. They leave
    // the set only once woken, so that a wake that fails, or a reconciler that dies meanwhile,
    // leaves them to the next pass rather than to their jobs' fallback timers. Two reconcilers
    // at once may wake one twice, and a delivery may have ended meanwhile: such a job finds
    // nothing to do. (A head woken above needs no such care: if its wake is lost, its turn
    // lapses into this set.)
    const lapsed = await this.#redis.srandmember(`${this.#prefix}lapsed`, MAX_LAPSED_WAKES);
    for (const deliveryId of lapsed) wakes.push({ deliveryId, at: now });
    await wake(wakes);
    if (lapsed.length > 0) await this.#redis.srem(`${this.#prefix}lapsed`, ...lapsed);
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
   * The subscription's max_in_flight or rate_limit changed (PUT): the head of its line is woken,
   * as many as the new limits have room for now, rather than only when one of its attempts ends
   * (a hanging receiver's, a whole DELIVERY_TIMEOUT later). A hold the gate knows of stands.
   * `origin` is the subscription's current one; each woken delivery's claim checks its own.
   * The cap the pre-check compares with is the new one from now on. Returns the wakes (for the
   * caller to run).
   */
  async resize(
    limits: Pick<GateInput, "subscriptionId" | "origin" | "maxInFlight" | "originMaxInFlight" | "rateLimit">,
    now = Date.now(),
  ): Promise<Wake[]> {
    await this.#redis.set(this.#key("cap", limits.subscriptionId), limits.maxInFlight, "KEEPTTL", "XX");
    // A release of a slot nobody holds: it frees nothing, and wakes whom the limits make room for.
    // (The lease only bounds a hold the release sets, and this one sets none.)
    return this.#releaseSlot(`resize:${limits.subscriptionId}`, { ...limits, leaseMs: 0 }, undefined, now);
  }

  async #nudge(subscriptionId: string, resume: boolean, now: number): Promise<Wake[]> {
    const woken = await this.#redis.gateNudge(
      this.#key("in-flight", subscriptionId),
      this.#key("line", subscriptionId),
      this.#key("turn", subscriptionId),
      `${this.#prefix}lines`,
      this.#key("disabled", subscriptionId),
      this.#key("hold", subscriptionId),
      `${this.#prefix}lapsed`,
      this.#key("place", subscriptionId),
      now,
      subscriptionId,
      LOST_TURN_MS,
      resume ? 1 : 0,
    );
    return (woken ?? []).map((deliveryId) => ({ deliveryId, at: now }));
  }

  /** Deliveries waiting in a subscription's line (for metrics and tests). */
  async lineLength(subscriptionId: string): Promise<number> {
    return this.#redis.zcard(this.#key("line", subscriptionId));
  }

  #key(kind: string, subscriptionId: string): string {
    return `${this.#prefix}${kind}:${subscriptionId}`;
  }
}

/** One call of a batched script: its values, in the order its Lua body reads them. */
type ScriptCall = (string | number)[];

/** The calls made in the same turn of the event loop, sent as one script run (see `batched`). */
function batchOf<T>(run: (calls: readonly ScriptCall[]) => Promise<T[]>): BatchLoader<ScriptCall, T> {
  return batchLoader(run, { maxBatchSize: MAX_BATCH });
}

/** A batch's JSON reply, one array per call (Lua's JSON encoder writes an empty array as {}). */
function repliesOf(json: string, calls: number): (string | number)[][] {
  const replies: unknown = JSON.parse(json);
  if (!Array.isArray(replies) || replies.length !== calls)
    throw new Error(`the gate answered ${json.slice(0, 200)} for ${calls} calls`);
  return replies.map((reply) => (Array.isArray(reply) ? (reply as (string | number)[]) : []));
}

function wakesFrom(flat: (string | number)[]): Wake[] {
  const wakes: Wake[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) wakes.push({ deliveryId: String(flat[i]), at: Number(flat[i + 1]) });
  return wakes;
}
