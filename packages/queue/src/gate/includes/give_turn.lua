--- @include "lapse"
--- @include "take_turns"
--[[
  Gives the head of the line the turn for the time at, unless a turn of the line is pending
  (turns lost lapse first). Returns the head, or nil when nobody got it.
]]
local function give_turn(line, turn, place, lapsed, at, now, lost_turn_ms)
  lapse(turn, lapsed, now, lost_turn_ms)
  if redis.call('ZCARD', turn) > 0 then return nil end
  return take_turns(line, turn, place, at, 1)[1]
end
