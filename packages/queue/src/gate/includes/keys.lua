--[[
  The keys of a subscription's and of an origin's state at the gate, under the gate's key prefix
  (see docs/architecture.md#the-gate for what each holds).
]]
local function subscription_keys(prefix, subscription)
  return {
    inflight = prefix .. 'in-flight:' .. subscription,
    rate = prefix .. 'rate:' .. subscription,
    probe = prefix .. 'probe:' .. subscription,
    line = prefix .. 'line:' .. subscription,
    turn = prefix .. 'turn:' .. subscription,
    place = prefix .. 'place:' .. subscription,
    hold = prefix .. 'hold:' .. subscription,
    cap = prefix .. 'cap:' .. subscription,
    disabled = prefix .. 'disabled:' .. subscription,
    origin = prefix .. 'origin:' .. subscription,
  }
end

local function origin_keys(prefix, origin)
  return {
    name = origin,
    inflight = prefix .. 'in-flight-origin:' .. origin,
    line = prefix .. 'origin-line:' .. origin,
    turn = prefix .. 'origin-turn:' .. origin,
    -- Every origin with a line, with its cap as last seen (for the reconciler's nudge).
    lines = prefix .. 'origin-lines',
  }
end
