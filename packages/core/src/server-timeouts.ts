import type { ServerOptions } from "node:http";

/**
 * Timeouts of our HTTP servers (the API's, and the worker's /metrics). Node's defaults hold a
 * connection that trickles its headers for a minute (and check only every 30 s), so a few hundred
 * slow clients (slowloris) can tie a server up; these close such connections within about 11 s.
 */
export const SERVER_TIMEOUTS = {
  /** The whole request head must arrive within this. */
  headersTimeoutMs: 10_000,
  /** The whole request, body included (at most the API's BODY_LIMIT_BYTES), must arrive within this. */
  requestTimeoutMs: 30_000,
  /** An idle keep-alive connection is closed after this. */
  keepAliveTimeoutMs: 5_000,
  /** How often Node looks for connections past headersTimeoutMs or requestTimeoutMs. */
  connectionsCheckingIntervalMs: 1_000,
} as const;

/** SERVER_TIMEOUTS as the options of node:http's createServer. */
export const serverTimeoutOptions = {
  headersTimeout: SERVER_TIMEOUTS.headersTimeoutMs,
  requestTimeout: SERVER_TIMEOUTS.requestTimeoutMs,
  keepAliveTimeout: SERVER_TIMEOUTS.keepAliveTimeoutMs,
  connectionsCheckingInterval: SERVER_TIMEOUTS.connectionsCheckingIntervalMs,
} as const satisfies ServerOptions;
