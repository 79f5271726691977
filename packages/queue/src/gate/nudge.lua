--[[
  nudge: the reconciler's safety net for one subscription's line, or its resume (the API enabled
  the subscription again, or closed its circuit by hand). See docs/architecture.md#the-gate.

  KEYS[1] in-flight:S   KEYS[2] line:S   KEYS[3] turn:S   KEYS[4] lines   KEYS[5] disabled:S
  KEYS[6] hold:S        KEYS[7] lapsed   KEYS[8] place:S
  ARGV[1] now   ARGV[2] the subscription   ARGV[3] lost_turn_ms
  ARGV[4] resume: 1 to lift the subscription's disabled mark and hold first, 0 for a nudge

  Result: the deliveries to wake now, or nil.
]]
--- @include "includes/lapse"
--- @include "includes/take_turns"

local inflight, line, turn, lines, disabled_mark, hold, lapsed, place = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local now, subscription, lost_turn_ms, resume = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[4] == '1'

if resume then
  redis.call('DEL', disabled_mark, hold)
  -- Turns given for the end of the hold just lifted are now: left at their time, they would keep
  -- the line waiting for it, newcomers included, up to MAX_RETRY_AFTER after the API said the
  -- deliveries go at once.
  local held = redis.call('ZRANGEBYSCORE', turn, '(' .. now, '+inf')
  if #held > 0 then
    for _, id in ipairs(held) do redis.call('ZADD', turn, now, id) end
    return held
  end
end
redis.call('ZREMRANGEBYSCORE', inflight, '-inf', now)
lapse(turn, lapsed, now, lost_turn_ms)
if redis.call('ZCARD', line) == 0 then
  if redis.call('ZCARD', turn) == 0 then redis.call('SREM', lines, subscription) end
  return false
end
if redis.call('EXISTS', disabled_mark) == 1 then return false end
if redis.call('ZCARD', turn) > 0 or redis.call('ZCARD', inflight) > 0 then return false end
-- The head gets the turn, its place kept.
return take_turns(line, turn, place, now, 1)
