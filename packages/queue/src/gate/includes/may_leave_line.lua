--[[
  Whether a delivery found in its line (its parked job's fallback timer fired) may leave it for
  an attempt: only as the head of a line nobody holds a turn of. Anyone else would jump the line,
  or take a turn's room. Acquire and precheck must agree on this.
]]
local function may_leave_line(line, turn, id)
  return redis.call('ZRANGE', line, 0, 0)[1] == id and redis.call('ZCARD', turn) == 0
end
