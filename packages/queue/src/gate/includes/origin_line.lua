--- @include "keys"
--- @include "lapse"
--- @include "take_turns"
--[[
  An origin's line: the subscriptions whose deliveries wait for room at the origin, in the order
  they take turns. Each is given one turn at a time and then goes to the back, so that one busy
  subscription cannot take every turn. A turn given out of the origin's room is also kept in the
  origin's turns until it is taken up or lapses, and takes room meanwhile.
  See docs/architecture.md#origin-lines.
]]

-- Puts subscription s at the back of origin o's line, unless it is in it already.
local function join_origin_line(o, s, subscription, origin_max)
  if redis.call('ZSCORE', o.line, subscription) then return end
  local tail = redis.call('ZRANGE', o.line, -1, -1, 'WITHSCORES')[2]
  redis.call('ZADD', o.line, tail and (tonumber(tail) + 1) or 0, subscription)
  redis.call('SET', s.origin, o.name, 'PX', 3600000)
  redis.call('HSET', o.lines, o.name, origin_max)
end

-- The origin's room: its cap, less its attempts in flight and the turns given out of it (the
-- slots of holders that died and turns lost are swept first).
local function origin_room(o, origin_max, now, lost_turn_ms)
  redis.call('ZREMRANGEBYSCORE', o.inflight, '-inf', now)
  redis.call('ZREMRANGEBYSCORE', o.turn, '-inf', now - lost_turn_ms)
  return origin_max - redis.call('ZCARD', o.inflight) - redis.call('ZCARD', o.turn)
end

-- Gives the head of subscription t's line a turn now if t may start an attempt as far as the gate
-- knows: not held, not found disabled, and with room of its own (its cap as last seen, less its
-- attempts and turns). Returns the head, or nil.
local function own_turn(t, lapsed, now, lost_turn_ms)
  if redis.call('EXISTS', t.disabled) == 1 then return nil end
  if tonumber(redis.call('GET', t.hold) or '0') > now then return nil end
  lapse(t.turn, lapsed, now, lost_turn_ms)
  local cap = tonumber(redis.call('GET', t.cap) or '0')
  if cap > 0 then
    redis.call('ZREMRANGEBYSCORE', t.inflight, '-inf', now)
    if redis.call('ZCARD', t.inflight) + redis.call('ZCARD', t.turn) >= cap then return nil end
  end
  return take_turns(t.line, t.turn, t.place, now, 1)[1]
end

-- Gives origin o's room to the subscriptions in its line, a turn each in their order, each going
-- to the back while it has more waiting. One that may not take a turn leaves the line: what holds
-- it (its own attempts ending, a hold's end, being enabled again) wakes its line. Returns
-- {id, at, id, at, ...}.
local function wake_origin(prefix, o, origin_max, lapsed, now, lost_turn_ms, max_wakes)
  local woken = {}
  if redis.call('ZCARD', o.line) == 0 then return woken end
  local room = origin_room(o, origin_max, now, lost_turn_ms)
  -- Bounds one call's work, whatever the line holds.
  local visits = 4 * max_wakes
  while room > 0 and visits > 0 and #woken < 2 * max_wakes do
    visits = visits - 1
    local first = redis.call('ZPOPMIN', o.line)[1]
    if not first then break end
    local t = subscription_keys(prefix, first)
    local head = own_turn(t, lapsed, now, lost_turn_ms)
    if head then
      redis.call('ZADD', o.turn, now, head)
      room = room - 1
      table.insert(woken, head)
      table.insert(woken, tostring(now))
      if redis.call('ZCARD', t.line) > 0 then join_origin_line(o, t, first, origin_max) end
    end
  end
  if redis.call('ZCARD', o.line) == 0 then redis.call('HDEL', o.lines, o.name) end
  return woken
end
