--- @include "batch"
--- @include "lapse"
--- @include "take_turns"
--- @include "origin_line"
--[[
  Gives turns to the head of subscription s's line, as many as s, its origin o and its rate
  window have room for now (pending turns count as taken); when only the rate window is full,
  gives the head one turn for the moment it frees. Nobody while s is held, unless the caller
  knows from the database that it is not (known_free), when the hold is forgotten and the turns
  given for its end are now. While others
  wait for the origin, s takes its turns there, in the origin's line; it joins that line too when
  the origin's room is what keeps its deliveries waiting. Returns {id, at, id, at, ...}.
]]
local function wake_room(s, o, subscription, max_in_flight, origin_max, rate_limit, now, known_free)
  local woken = {}
  if known_free then
    -- Forgotten even when nobody waits: a hold left behind would make newcomers wait in line.
    redis.call('DEL', s.hold)
    -- Turns given for the end of a hold that is over (an explicit action's probe closed the
    -- circuit) are now. Those a rate window away or less are the rate limit's, and stand.
    for _, id in ipairs(redis.call('ZRANGEBYSCORE', s.turn, '(' .. (now + rate_window), '+inf')) do
      redis.call('ZADD', s.turn, now, id)
      redis.call('ZADD', o.turn, now, id)
      table.insert(woken, id)
      table.insert(woken, tostring(now))
    end
  end
  local waiting = redis.call('ZCARD', s.line)
  if waiting == 0 then return woken end
  if not known_free and tonumber(redis.call('GET', s.hold) or '0') > now then return woken end
  -- Room is counted without the slots of holders that died and the turns that were lost.
  redis.call('ZREMRANGEBYSCORE', s.inflight, '-inf', now)
  lapse(s.turn, lapsed, now, lost_turn_ms)
  local pending = redis.call('ZCARD', s.turn)
  local room = max_in_flight - redis.call('ZCARD', s.inflight) - pending
  if room <= 0 then return woken end
  if redis.call('ZCARD', o.line) > 0 then
    join_origin_line(o, s, subscription, origin_max)
    return woken
  end
  local origin = origin_room(o, origin_max, now, lost_turn_ms)
  if origin < math.min(room, waiting) then join_origin_line(o, s, subscription, origin_max) end
  room = math.min(room, origin)
  if room <= 0 then return woken end
  local at = now
  if rate_limit > 0 then
    redis.call('ZREMRANGEBYSCORE', s.rate, '-inf', now - rate_window)
    local rate_room = rate_limit - redis.call('ZCARD', s.rate) - pending
    if rate_room <= 0 then
      if pending > 0 then return woken end
      room = 1
      at = tonumber(redis.call('ZRANGE', s.rate, 0, 0, 'WITHSCORES')[2]) + rate_window
    else
      room = math.min(room, rate_room)
    end
  end
  for _, head in ipairs(take_turns(s.line, s.turn, s.place, at, math.min(room, waiting, max_wakes))) do
    -- A turn for now takes the origin's room until it is taken up; one for later does not.
    if at == now then redis.call('ZADD', o.turn, now, head) end
    table.insert(woken, head)
    table.insert(woken, tostring(at))
  end
  return woken
end
