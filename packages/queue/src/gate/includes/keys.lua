--- @include "batch"
--[[
  The keys of a subscription's and of an origin's state at the gate, built from the prefix (see
  docs/architecture.md#the-gate for what each holds).
]]
local function subscription_keys(subscription)
  local at = prefix
  return {
    inflight = at .. 'in-flight:' .. subscription,
    rate = at .. 'rate:' .. subscription,
    probe = at .. 'probe:' .. subscription,
    line = at .. 'line:' .. subscription,
    turn = at .. 'turn:' .. subscription,
    place = at .. 'place:' .. subscription,
    hold = at .. 'hold:' .. subscription,
    cap = at .. 'cap:' .. subscription,
    disabled = at .. 'disabled:' .. subscription,
  }
end

local function origin_keys(origin)
  return {
    inflight = prefix .. 'in-flight-origin:' .. origin,
    line = prefix .. 'origin-line:' .. origin,
  }
end
