export * from "./delivery-gate.ts";
export { type GateLimits, gateLimits, originOf } from "./limits.ts";
export { GATE_SCRIPTS, loadScript } from "./load-script.ts";
