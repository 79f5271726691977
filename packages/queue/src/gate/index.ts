export * from "./delivery-gate.ts";
export { type GateLimits, gateLimits, originOf } from "./limits.ts";
