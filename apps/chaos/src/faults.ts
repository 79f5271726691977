import type { Stack } from "./stack.ts";

/**
 * One fault: `inject` starts it, `recover` ends it (the time between is the run's hold time).
 * `dropsExpected`: the fault is the API process dying, so the requests it was answering die with
 * it and clients retry them (with their Idempotency-Key); in every other row a dropped
 * connection is a failure.
 */
export interface Fault {
  name: string;
  summary: string;
  dropsExpected?: boolean;
  inject(stack: Stack): Promise<void> | void;
  recover(stack: Stack): Promise<void> | void;
}

/** Keeps silencing every connection through `proxy` (new ones too) until the returned function is called. */
function silence(proxy: Stack["redisProxy"]): () => void {
  proxy.blackhole();
  const timer = setInterval(() => proxy.blackhole(), 50);
  return () => clearInterval(timer);
}

let unsilence: (() => void) | undefined;

export const FAULTS: Fault[] = [
  {
    name: "worker-sigkill",
    summary: "SIGKILL one worker mid-load; a new one starts when the fault ends (the others carry on meanwhile)",
    inject: (stack) => stack.killWorker(),
    recover: (stack) => {
      stack.startWorker().catch((error: Error) => console.error(`could not start a new worker: ${error.message}`));
    },
  },
  {
    name: "api-sigkill",
    summary: "SIGKILL the API mid-burst; clients retry with their Idempotency-Key; it restarts when the fault ends",
    dropsExpected: true,
    inject: (stack) => stack.killApi(),
    recover: (stack) => stack.startApi(),
  },
  {
    name: "redis-flushall",
    summary: "FLUSHALL: every job, lease and gate key gone at once",
    inject: (stack) => stack.flushRedis(),
    recover: () => {},
  },
  {
    name: "redis-restart",
    summary: "Redis stops (SIGKILL, nothing persisted) and starts again, empty, when the fault ends",
    inject: (stack) => stack.redis.stop(),
    recover: (stack) => stack.redis.start(),
  },
  {
    name: "redis-blackhole",
    summary: "Redis's proxy stops answering: connections stay open, nothing comes back",
    inject: (stack) => {
      unsilence = silence(stack.redisProxy);
    },
    recover: () => unsilence?.(),
  },
  {
    name: "postgres-cut",
    summary: "PostgreSQL's proxy drops every connection and refuses new ones",
    inject: (stack) => stack.postgresProxy.refuse(),
    recover: (stack) => stack.postgresProxy.accept(),
  },
  {
    name: "postgres-blackhole",
    summary: "PostgreSQL's proxy stops answering: connections stay open, nothing comes back",
    inject: (stack) => {
      unsilence = silence(stack.postgresProxy);
    },
    recover: () => unsilence?.(),
  },
  {
    name: "receiver-stall",
    summary: "One receiver sends its status and half a body, then hangs",
    inject: (stack) => {
      stack.deliveries.stalling = true;
    },
    recover: (stack) => {
      stack.deliveries.stalling = false;
    },
  },
];
