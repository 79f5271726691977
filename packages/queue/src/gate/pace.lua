--[[
  pace: the last step before a rate-limited subscription's request leaves: the sends themselves
  are counted over the rate window too. See docs/architecture.md#the-gate.

  KEYS[1] sent:S
  ARGV[1] now   ARGV[2] rate_limit   ARGV[3] this send's member   ARGV[4] rate_window

  Result: 0 when the request may leave now (and it is counted), or how long to wait (ms).
]]
local sent, now, rate_limit, member, rate_window = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', sent, '-inf', now - rate_window)
if redis.call('ZCARD', sent) >= rate_limit then
  return tonumber(redis.call('ZRANGE', sent, 0, 0, 'WITHSCORES')[2]) + rate_window - now
end
redis.call('ZADD', sent, now, member)
redis.call('PEXPIRE', sent, rate_window * 2)
return 0
