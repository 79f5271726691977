import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from "node:dns";
import type { LookupFunction } from "node:net";
import { isPublicAddress } from "@webhooks/core";

/**
 * Raised when a destination resolves only to addresses we refuse to connect to
 * (docs/api.md#webhook-urls-and-egress-safety). The message becomes the attempt's `error`, which
 * the tenant sees in the portal, so it does not name the addresses: they would map our internal
 * network for whoever owns the DNS name. They are kept in `addresses`, for the worker's log.
 */
export class DestinationNotAllowedError extends Error {
  readonly code = "DESTINATION_NOT_ALLOWED";
  constructor(
    readonly host: string,
    readonly addresses: string[],
  ) {
    super(`destination not allowed: ${host} does not resolve to a public address`);
    this.name = "DestinationNotAllowedError";
  }
}

export type Resolver = (
  hostname: string,
  callback: (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

const systemResolver: Resolver = (hostname, callback) => dnsLookup(hostname, { all: true, verbatim: true }, callback);

/**
 * A DNS lookup for outgoing sockets that drops every non-public address from the answer. It runs
 * when the socket connects, on the very address it will connect to, so a name that resolved to a
 * public address when the subscription was created and to 10.0.0.1 now (DNS rebinding) is still
 * refused. `resolve` is injectable for tests.
 */
export function createSafeLookup(resolve: Resolver = systemResolver): LookupFunction {
  return ((hostname: string, options: LookupOptions, callback: (...args: unknown[]) => void) => {
    resolve(hostname, (error, addresses) => {
      if (error) return callback(error);
      const wantedFamily = typeof options.family === "number" ? options.family : 0;
      const allowed = addresses.filter(
        (entry) => isPublicAddress(entry.address) && (wantedFamily === 0 || entry.family === wantedFamily),
      );
      if (allowed.length === 0) {
        return callback(
          new DestinationNotAllowedError(
            hostname,
            addresses.map((entry) => entry.address),
          ),
        );
      }
      if (options.all) return callback(null, allowed);
      const first = allowed[0]!;
      return callback(null, first.address, first.family);
    });
  }) as LookupFunction;
}
