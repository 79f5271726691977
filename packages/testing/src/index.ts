export * from "./config.ts";
export * from "./database.ts";
export * from "./ports.ts";
export * from "./processes.ts";
export * from "./receiver.ts";
export * from "./redis-cluster.ts";
export * from "./redis-server.ts";
export * from "./wait.ts";
