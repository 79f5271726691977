export * from "./delivery-gate.ts";
export * from "./delivery-queue.ts";
export * from "./queue-layout.ts";
export * from "./queue-metrics.ts";
export * from "./reachability.ts";
export * from "./redis.ts";
