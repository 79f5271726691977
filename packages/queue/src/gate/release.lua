--[[
  release: attempts (or slots a process kept) ended. Batched (see includes/batch.lua); one call
  per slot released. See docs/architecture.md#the-gate.

  A call's arguments, in order (ReleaseCall in scripts.ts):
    slot           the slot's name in the in-flight sets
    subscription   its subscription
    origin_name    its origin
    now            epoch ms
    max_in_flight  the subscription's cap
    origin_max     the origin's cap
    rate_limit     starts per rate window, 0 for none
    hold_at        what the attempt's outcome says of the subscription: held until then (epoch
                   ms); 0 (or a time past): nothing holds it; -1: it cannot tell
    lease          how long a hold the gate learns here is kept at most (ms)

  Reply per call: the deliveries to wake, {id, at, id, at, ...}.
]]
--- @include "includes/batch"
--- @include "includes/keys"
--- @include "includes/give_turn"
--- @include "includes/wake_room"
--- @include "includes/origin_line"

local function release(slot, subscription, origin_name, now, max_in_flight, origin_max, rate_limit, hold_at, lease)
  local s, o = subscription_keys(prefix, subscription), origin_keys(prefix, origin_name)
  redis.call('ZREM', s.inflight, slot)
  redis.call('ZREM', o.inflight, slot)
  -- The slots of holders that died go too, so that a set never full (and never swept by acquire)
  -- does not keep them.
  redis.call('ZREMRANGEBYSCORE', s.inflight, '-inf', now)
  redis.call('ZREMRANGEBYSCORE', o.inflight, '-inf', now)
  local result
  if hold_at > now then
    -- This attempt's own health write held the subscription (its circuit opened, or the receiver
    -- sent Retry-After): the slot it freed wakes nobody, and the head of the line gets the turn
    -- for the hold's end.
    redis.call('SET', s.hold, hold_at, 'PX', math.min(hold_at - now, lease))
    local head = give_turn(s.line, s.turn, s.place, lapsed, hold_at, now, lost_turn_ms)
    result = head and {head, tostring(hold_at)} or {}
  else
    -- 0 (or a time past): its outcome says nothing holds the subscription now (it succeeded, or
    -- a probe closed the circuit), and a hold the gate kept is forgotten; -1: the hold stands.
    result = wake_room(s, o, subscription, max_in_flight, origin_max, rate_limit, now, hold_at >= 0)
  end
  -- The origin's room goes to the subscriptions waiting for it, in their order.
  for _, item in ipairs(wake_origin(prefix, o, origin_max, lapsed, now, lost_turn_ms, max_wakes)) do
    table.insert(result, item)
  end
  return result
end

return run_batch(release)
