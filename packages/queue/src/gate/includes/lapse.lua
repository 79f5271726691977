--[[
  Turns not taken up lost_turn_ms after their time: the wake that should have brought the
  delivery was lost. They leave the turns, so that the line moves on, for the lapsed set, whose
  deliveries the reconciler wakes on its next pass.
]]
local function lapse(turn, lapsed, now, lost_turn_ms)
  local gone = redis.call('ZRANGEBYSCORE', turn, '-inf', now - lost_turn_ms)
  for _, id in ipairs(gone) do
    redis.call('SADD', lapsed, id)
    redis.call('ZREM', turn, id)
  end
end
