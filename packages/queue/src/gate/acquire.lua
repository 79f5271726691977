--[[
  acquire: may each attempt start now? Batched (see includes/batch.lua); one call per attempt,
  after its claim. See docs/architecture.md#the-gate.

  A call's arguments, in order (AcquireCall in scripts.ts):
    id             the delivery
    subscription   its subscription
    origin_name    its url's origin (scheme, host, port)
    now            epoch ms
    lease          how long the slot lasts if its holder dies (ms)
    max_in_flight  the subscription's cap
    origin_max     the origin's cap
    rate_limit     starts per rate window, 0 for none
    held_until     epoch ms until which the subscription is held (0: not held)
    circuit_open   boolean
    probe_ms       the open circuit's probe interval
    disabled       boolean: the service disabled the subscription
    slot           the slot's name in the in-flight sets
    keep_ms        how long the process may keep the slot for its next attempts (0: not at all)
    test           boolean: a test event's delivery

  Reply per call: {0, reason, wakes...} when it must wait, or {1, probe ('1'/'0'), keep (0/1),
  wakes...} when it may start; wakes are {id, at, id, at, ...}.
]]
--- @include "includes/batch"
--- @include "includes/keys"
--- @include "includes/lapse"
--- @include "includes/may_leave_line"
--- @include "includes/give_turn"
--- @include "includes/take_turns"
--- @include "includes/wake_room"
--- @include "includes/origin_line"

-- How long a claim that found the subscription disabled keeps its line from being claimed again.
-- The API lifts it when the subscription is enabled again; should that call fail, the line moves
-- again at most this long after.
local DISABLED_RECHECK_MS = 5 * 60000

local function acquire(id, subscription, origin_name, now, lease, max_in_flight, origin_max, rate_limit, held_until,
                       circuit_open, probe_ms, disabled, slot, keep_ms, test)
  local s, o = subscription_keys(prefix, subscription), origin_keys(prefix, origin_name)

  -- This script runs before every attempt, so its common case (nobody waiting, room to spare)
  -- is kept to a few calls: sweeps of expired entries happen only where they could change the
  -- decision (a set that looks full, a line being woken, turns that exist).

  -- Turns not taken up in time lapse; then, is it this delivery's turn?
  local my_turn = false
  -- Where it was in the line when given its turn, should it have to go back.
  local my_place = nil
  local turns = redis.call('ZCARD', s.turn)
  if turns > 0 then
    lapse(s.turn, lapsed, now, lost_turn_ms)
    my_turn = redis.call('ZREM', s.turn, id) == 1
    turns = redis.call('ZCARD', s.turn)
    if my_turn then
      my_place = tonumber(redis.call('HGET', s.place, id))
      redis.call('HDEL', s.place, id)
      -- The origin's room it was given is its own now.
      redis.call('ZREM', o.turn, id)
    end
  end

  -- Whether an in-flight set holds its limit of live attempts: the slots of holders that died
  -- (their lease expired) are swept only when the set looks full.
  local function full(set, limit)
    if redis.call('ZCARD', set) < limit then return false end
    redis.call('ZREMRANGEBYSCORE', set, '-inf', now)
    return redis.call('ZCARD', set) >= limit
  end

  -- Deliveries woken from an origin's line by a call of this batch, for the reply.
  local origin_wakes = {}
  local function reply_with(reply, wakes)
    for _, item in ipairs(wakes) do table.insert(reply, item) end
    return reply
  end

  -- Whether it leaves the head of the line to try: if it must wait again, it goes back there.
  local was_head = my_turn

  -- A test goes ahead of the line: out of it if it was in it, and back at its head if it must wait.
  if test and not my_turn then
    redis.call('ZREM', s.line, id)
    was_head = true
  end

  -- Joins the line (back at its place if it had the turn, at its front if it was the head, so it
  -- keeps its place), and if the wait has a known end and nobody holds the turn, gives the turn
  -- to the head of the line for that moment. Also leaves the subscription's cap as it is now for
  -- the pre-check, which only the deliveries of a subscription seen waiting go through.
  local function wait(reason, wait_ms)
    redis.call('SET', s.cap, max_in_flight, 'PX', 3600000)
    local score = now
    if my_place then
      score = my_place
    elseif was_head then
      local head = redis.call('ZRANGE', s.line, 0, 0, 'WITHSCORES')
      if head[2] then score = tonumber(head[2]) - 1 end
    end
    redis.call('ZADD', s.line, 'NX', score, id)
    redis.call('SADD', lines, subscription)
    if reason == 'origin_max_in_flight' then join_origin_line(o, s, subscription, origin_max) end
    local reply = {0, reason}
    if wait_ms ~= nil then
      local at = now + math.max(0, wait_ms)
      -- Turns pending for later than this wait's end (a hold PostgreSQL has since shortened, as an
      -- explicit action does) are for its end now.
      for _, later in ipairs(redis.call('ZRANGEBYSCORE', s.turn, '(' .. at, '+inf')) do
        redis.call('ZADD', s.turn, at, later)
        table.insert(reply, later)
        table.insert(reply, tostring(at))
      end
      local head = give_turn(s.line, s.turn, s.place, lapsed, at, now, lost_turn_ms)
      if head then
        table.insert(reply, head)
        table.insert(reply, tostring(at))
      end
    end
    return reply_with(reply, origin_wakes)
  end

  if not my_turn and not test then
    if redis.call('ZSCORE', s.line, id) then
      -- Its own fallback timer fired.
      if not may_leave_line(s.line, s.turn, id) then return {0, 'in_line'} end
      redis.call('ZREM', s.line, id)
      was_head = true
    elseif redis.call('ZCARD', s.line) > 0 or (turns > 0 and (rate_limit > 0 or tonumber(redis.call('GET', s.hold) or '0') > now)) then
      -- The claim just read the subscription enabled: a mark left from when it was disabled no
      -- longer holds the line (the nudge wakes it), should the API's call that lifts it have failed.
      if not disabled then redis.call('DEL', s.disabled) end
      return wait('in_line', nil)
    end
  end
  -- Deliveries woken from the line and on their way (turns) keep the room they were given: a
  -- newcomer finding only turns pending, and room beside them, goes at once. If it joined the
  -- line instead, at a steady rate some newcomer would always find a turn pending, and the line,
  -- once formed, would never empty while the subscription is far from its cap. It still waits in
  -- line when a turn is pending for the end of a hold the gate knows of (its claim may have read
  -- the subscription before the hold), and for a rate-limited subscription, whose turns hold
  -- room in the rate window too, which a newcomer does not see here.
  local room_taken = my_turn and 0 or turns

  if disabled then
    redis.call('SET', s.disabled, 1, 'PX', DISABLED_RECHECK_MS)
    return wait('disabled', nil)
  end
  if held_until > now then
    -- So that the attempts that end meanwhile wake nobody (see wake_room).
    redis.call('SET', s.hold, held_until, 'PX', math.min(held_until - now, lease))
    return wait(circuit_open and 'circuit_open' or 'retry_after', held_until - now)
  end
  local is_probe = false
  -- An open circuit lets one probe through per interval; a resend, recover or test brings the
  -- next one forward (the API clears the probe key and gives that delivery the turn).
  if circuit_open then
    if not redis.call('SET', s.probe, id, 'NX', 'PX', math.max(1, probe_ms)) then
      return wait('circuit_open', redis.call('PTTL', s.probe))
    end
    is_probe = true
  end
  local blocked = nil
  if full(s.inflight, max_in_flight - room_taken) then
    blocked = 'max_in_flight'
  else
    -- Others wait for the origin without a turn: its room is theirs first, in their order, and a
    -- newcomer waits behind them (a test goes ahead, as it does in its subscription's line).
    if not my_turn and not test and redis.call('ZCARD', o.line) > 0 then
      origin_wakes = wake_origin(prefix, o, origin_max, lapsed, now, lost_turn_ms, max_wakes)
      if redis.call('ZCARD', o.line) > 0 then blocked = 'origin_max_in_flight' end
    end
    -- Turns given out of the origin's room take it until they are taken up.
    local origin_turns = redis.call('ZCARD', o.turn)
    if origin_turns > 0 then
      redis.call('ZREMRANGEBYSCORE', o.turn, '-inf', now - lost_turn_ms)
      origin_turns = redis.call('ZCARD', o.turn)
    end
    if not blocked and full(o.inflight, origin_max - origin_turns) then blocked = 'origin_max_in_flight' end
  end
  local rate_wait = nil
  if not blocked and rate_limit > 0 then
    redis.call('ZREMRANGEBYSCORE', s.rate, '-inf', now - rate_window)
    if redis.call('ZCARD', s.rate) >= rate_limit then
      blocked = 'rate_limit'
      rate_wait = tonumber(redis.call('ZRANGE', s.rate, 0, 0, 'WITHSCORES')[2]) + rate_window - now
    end
  end
  if blocked then
    if is_probe then redis.call('DEL', s.probe) end
    return wait(blocked, rate_wait)
  end

  -- A slot the process may keep is used for keep_ms more: its entry outlives the last attempt
  -- that may start on it by a lease.
  redis.call('ZADD', s.inflight, now + keep_ms + lease, slot)
  redis.call('ZADD', o.inflight, now + keep_ms + lease, slot)
  if rate_limit > 0 then
    redis.call('ZADD', s.rate, now, id .. '@' .. now)
    redis.call('PEXPIRE', s.rate, rate_window * 2)
  end
  -- A probe decides alone whether the rest may follow; otherwise pass the turn on while there is room.
  if is_probe then return reply_with({1, '1', 0}, origin_wakes) end
  -- A test went past what may still hold the others (a disabled subscription, their line): its
  -- start says nothing of whether they may go.
  if test then return reply_with({1, '0', 0}, origin_wakes) end
  local reply = reply_with({1, '0', 0}, origin_wakes)
  -- The claim read the subscription's health just now, and nothing holds it: a hold left in
  -- Redis is over. Room left goes to the line, and to the origin's line.
  local woken = wake_room(s, o, subscription, max_in_flight, origin_max, rate_limit, now, true)
  reply_with(reply, woken)
  reply_with(reply, wake_origin(prefix, o, origin_max, lapsed, now, lost_turn_ms, max_wakes))
  -- The process may keep the slot for its next attempts only while nobody waits for the
  -- subscription, and while it and its origin have a quarter of their caps to spare: a kept slot
  -- sits free between two attempts, and near a cap that would make others wait.
  local function roomy(set, limit) return redis.call('ZCARD', set) * 4 <= limit * 3 end
  if keep_ms > 0 and #reply == 3 and redis.call('ZCARD', s.line) == 0 and redis.call('ZCARD', s.turn) == 0
      and redis.call('ZCARD', o.line) == 0 and roomy(s.inflight, max_in_flight) and roomy(o.inflight, origin_max) then
    reply[3] = 1
  end
  return reply
end

return run_batch(acquire)
