--[[
  Takes the first n of the line out of it, for turns at the time at, each with its place kept.
  With no turn pending, the places left are those of lapsed turns: they go first.
  Returns the deliveries given a turn.
]]
local function take_turns(line, turn, place, at, n)
  if redis.call('ZCARD', turn) == 0 then redis.call('DEL', place) end
  local heads = redis.call('ZRANGE', line, 0, n - 1, 'WITHSCORES')
  local taken = {}
  for i = 1, #heads, 2 do
    local head = heads[i]
    redis.call('ZREM', line, head)
    redis.call('ZADD', turn, at, head)
    redis.call('HSET', place, head, heads[i + 1])
    table.insert(taken, head)
  end
  return taken
end
