export * from "./delivery-queue.ts";
export * from "./gate/index.ts";
export * from "./queue-layout.ts";
export * from "./queue-metrics.ts";
export * from "./reachability.ts";
export * from "./redis.ts";
