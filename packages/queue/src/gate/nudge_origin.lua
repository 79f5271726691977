--[[
  nudge_origin: the reconciler's safety net for one origin's line: gives the origin's room, if it
  has any (the slots of holders that died expire, turns lost lapse), to the subscriptions waiting
  for it, as an attempt that ends at the origin would. See docs/architecture.md#origin-lines.

  KEYS[1] the hash of origins with a line, each with its cap as last seen
  ARGV[1] the gate's key prefix   ARGV[2] the origin   ARGV[3] now   ARGV[4] lost_turn_ms
  ARGV[5] max_wakes

  Result: the deliveries to wake, {id, at, id, at, ...}.
]]
--- @include "includes/keys"
--- @include "includes/origin_line"

local prefix, origin = ARGV[1], ARGV[2]
local now, lost_turn_ms, max_wakes = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local o = origin_keys(prefix, origin)
local origin_max = tonumber(redis.call('HGET', KEYS[1], origin) or '0')
if origin_max <= 0 or redis.call('ZCARD', o.line) == 0 then
  redis.call('HDEL', KEYS[1], origin)
  return {}
end
return wake_origin(prefix, o, origin_max, prefix .. 'lapsed', now, lost_turn_ms, max_wakes)
