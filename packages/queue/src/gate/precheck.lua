--[[
  precheck: before the claim, for a job that names its subscription. A delivery joins the line
  here, without touching the database, when others wait ahead, the subscription is at its cap as
  last seen, or it was found disabled. See docs/architecture.md#the-gate.

  KEYS[1] in-flight:S   KEYS[2] line:S   KEYS[3] turn:S   KEYS[4] lines   KEYS[5] cap:S
  KEYS[6] disabled:S    KEYS[7] lapsed
  ARGV[1] the delivery   ARGV[2] now   ARGV[3] lost_turn_ms   ARGV[4] the subscription

  Result: 0 go on and claim (acquire decides after the claim); 1 it joined the line; 2 it was in
  line already, and stays.
]]
--- @include "includes/lapse"
--- @include "includes/may_leave_line"

local inflight, line, turn, lines, cap, disabled_mark, lapsed = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local id, now, lost_turn_ms, subscription = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]

lapse(turn, lapsed, now, lost_turn_ms)
if redis.call('ZSCORE', turn, id) then return 0 end
local disabled = redis.call('EXISTS', disabled_mark) == 1
if redis.call('ZSCORE', line, id) then
  -- Its job's fallback timer fired while it waits in line. It goes on to the claim only where
  -- acquire would let it out. Anyone else stays parked here, without a claim taken back: a line of
  -- a million deliveries behind an open circuit would otherwise cost a million claims per
  -- fallback period.
  if disabled or not may_leave_line(line, turn, id) then return 2 end
  return 0
end
-- Turns pending take room but do not make a newcomer wait (see acquire).
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
