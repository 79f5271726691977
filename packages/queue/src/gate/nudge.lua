--[[
  nudge: the reconciler's safety net for one subscription's line, or its resume (the API enabled
  the subscription again, or closed its circuit by hand). See docs/architecture.md#the-gate.

  KEYS[1] the set of subscriptions with a line
  ARGV[1] the gate's key prefix   ARGV[2] the subscription   ARGV[3] now   ARGV[4] lost_turn_ms
  ARGV[5] resume: 1 to lift the subscription's disabled mark and hold first, 0 for a nudge

  Result: the deliveries to wake now, or nil.
]]
--- @include "includes/keys"
--- @include "includes/lapse"
--- @include "includes/take_turns"

local lines, prefix, subscription = KEYS[1], ARGV[1], ARGV[2]
local now, lost_turn_ms, resume = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5] == '1'
local s = subscription_keys(prefix, subscription)
local lapsed = prefix .. 'lapsed'

if resume then
  redis.call('DEL', s.disabled, s.hold)
  -- Turns given for the end of the hold just lifted are now: left at their time, they would keep
  -- the line waiting for it, newcomers included, up to MAX_RETRY_AFTER after the API said the
  -- deliveries go at once.
  local held = redis.call('ZRANGEBYSCORE', s.turn, '(' .. now, '+inf')
  if #held > 0 then
    for _, id in ipairs(held) do redis.call('ZADD', s.turn, now, id) end
    return held
  end
end
redis.call('ZREMRANGEBYSCORE', s.inflight, '-inf', now)
lapse(s.turn, lapsed, now, lost_turn_ms)
if redis.call('ZCARD', s.line) == 0 then
  if redis.call('ZCARD', s.turn) == 0 then redis.call('SREM', lines, subscription) end
  return false
end
if redis.call('EXISTS', s.disabled) == 1 then return false end
if redis.call('ZCARD', s.turn) > 0 or redis.call('ZCARD', s.inflight) > 0 then return false end
-- Waiting in an origin's line: its turn comes from there (see nudge_origin.lua).
local origin = redis.call('GET', s.origin)
if origin and redis.call('ZSCORE', origin_keys(prefix, origin).line, subscription) then return false end
-- The head gets the turn, its place kept.
return take_turns(s.line, s.turn, s.place, now, 1)
