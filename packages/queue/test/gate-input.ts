import type { GateInput } from "../src/index.ts";

/**
 * A delivery at the gate, for the gate's own tests: one subscription on a loopback origin, no
 * rate limit, nothing holding it, a lease of a minute; `overrides` change any of it.
 */
export function gateInput(deliveryId: string, overrides: Partial<GateInput> = {}): GateInput {
  return {
    deliveryId,
    subscriptionId: "sub_gate",
    origin: "http://127.0.0.1:1",
    maxInFlight: 10,
    originMaxInFlight: 50,
    rateLimit: null,
    heldUntil: null,
    circuitOpen: false,
    probeIntervalMs: 30_000,
    disabled: false,
    leaseMs: 60_000,
    ...overrides,
  };
}
