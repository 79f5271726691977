--[[
  The frame of a batched script (acquire, release): the calls of the attempts a worker starts or
  ends in the same turn of its event loop, run in order and atomically in one script, as if made
  one after another. See docs/architecture.md#the-gate.

  KEYS[1]  the set of subscriptions with a line (it routes the script on a Redis Cluster, where
           every gate key shares one hash tag)
  ARGV[1]  the gate's key prefix
  ARGV[2]  lost_turn_ms: a turn not taken up this long after its time lapses
  ARGV[3]  rate_window: the window rate_limit counts starts in (ms)
  ARGV[4]  max_wakes: the most deliveries one call moves out of a line
  ARGV[5]  the calls: a JSON array of arrays, each the arguments of one call, in order

  Result: a JSON array of the calls' replies, in order.
]]
local lines = KEYS[1]
local prefix = ARGV[1]
local lost_turn_ms, rate_window, max_wakes = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local lapsed = prefix .. 'lapsed'

local function run_batch(one)
  local replies = {}
  for i, call in ipairs(cjson.decode(ARGV[5])) do replies[i] = one(unpack(call)) end
  return cjson.encode(replies)
end
