import { createHash } from "node:crypto";
import type { LookupAddress } from "node:dns";
import { isIP, type Socket } from "node:net";
import type { DestinationPolicy } from "@webhooks/core";
import { Agent, buildConnector, type Dispatcher, Pool } from "undici";
import { createSafeLookup, type Resolver } from "./safe-lookup.ts";

/**
 * Every outgoing request of the worker (webhooks and OAuth2 token requests) leaves through here:
 * straight to the destination, or through the egress proxy (EGRESS_PROXY_URL,
 * docs/operations.md#egress-proxy-and-static-ips). Either way the destination checks apply to
 * the destination (docs/api.md#webhook-urls-and-egress-safety): a host name is resolved here, at
 * connect time, and refused unless it resolves to a public address. Through the proxy, the
 * proxy is then asked for that checked address, never for the name, so that it cannot resolve
 * the name again to another address (DNS rebinding):
 *
 * - https: `CONNECT <address>:<port>`, then TLS inside the tunnel with the name as SNI and the
 *   certificate checked against the name, and `Host: <name>`; the receiver sees the request as
 *   sent without a proxy.
 * - http: the request in absolute form, `POST http://<address>:<port>/path`, with `Host: <name>`.
 *   A proxy that follows RFC 9112 replaces the Host header with the address, so a receiver that
 *   serves several names on one address must use https.
 *
 * Where private destinations are allowed (development), names go to the proxy as they are.
 */

export interface EgressOptions {
  /** The attempt's whole time; a connection gets at most 10 s of it. */
  timeoutMs: number;
  policy: DestinationPolicy;
  /** `http://[user:pass@]host:port`, or undefined to connect directly. */
  proxyUrl?: string | undefined;
  /** Tests replace DNS; production uses the system resolver. */
  resolve?: Resolver | undefined;
  /**
   * CA certificates (PEM) to trust instead of the system's, for tests. Production trusts the
   * system's store (and NODE_EXTRA_CA_CERTS).
   */
  trustedCertificates?: string[] | undefined;
}

/** A client certificate and its key, PEM, for mutual TLS. */
export interface TlsIdentity {
  certificate: string;
  privateKey: string;
}

/** The proxy failed the request: it could not be reached, or refused to forward it. Never the receiver's answer. */
export class EgressProxyError extends Error {
  readonly code = "EGRESS_PROXY";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "EgressProxyError";
  }
}

export interface EgressRequest {
  method: "POST";
  headers: Record<string, string>;
  body: string;
  signal: AbortSignal;
  identity?: TlsIdentity | undefined;
}

interface Proxy {
  url: URL;
  /** `Basic ...` from the URL's user and password, if it has them. */
  authorization: string | undefined;
  /** Connections to the proxy: CONNECT takes one over as a tunnel; absolute-form requests share them. */
  pool: Pool;
}

/** Agents kept for client certificates at most; one more closes the oldest (its requests in flight finish). */
const MAX_IDENTITY_AGENTS = 256;
const MAX_CONNECT_MS = 10_000;

export class Egress {
  readonly #options: EgressOptions;
  readonly #connectTimeoutMs: number;
  readonly #lookup: ReturnType<typeof createSafeLookup> | undefined;
  readonly #proxy: Proxy | undefined;
  /** One agent without a client certificate, and one per certificate, most recently used last. */
  readonly #agent: Agent;
  readonly #identityAgents = new Map<string, Agent>();

  constructor(options: EgressOptions) {
    this.#options = options;
    this.#connectTimeoutMs = Math.min(options.timeoutMs, MAX_CONNECT_MS);
    this.#lookup = options.policy.allowPrivateNetworks ? undefined : createSafeLookup(options.resolve);
    if (options.proxyUrl !== undefined) {
      const url = new URL(options.proxyUrl);
      const authorization =
        url.username === ""
          ? undefined
          : `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString("base64")}`;
      this.#proxy = {
        url,
        authorization,
        pool: new Pool(url.origin, { keepAliveTimeout: 30_000, connect: { timeout: this.#connectTimeoutMs } }),
      };
    }
    this.#agent = this.#newAgent(undefined);
  }

  /** Sends one request to `url`, directly or through the proxy; throws what undici, the lookup or the proxy threw. */
  async request(url: URL, request: EgressRequest): Promise<Dispatcher.ResponseData> {
    const proxy = this.#proxy;
    if (proxy !== undefined && url.protocol === "http:") return this.#requestAbsoluteForm(proxy, url, request);
    const dispatcher = request.identity ? this.#identityAgent(request.identity) : this.#agent;
    return dispatcher.request({
      origin: url.origin,
      path: `${url.pathname}${url.search}`,
      method: request.method,
      headers: request.headers,
      body: request.body,
      signal: request.signal,
    });
  }

  async close(): Promise<void> {
    await Promise.all([
      this.#agent.close(),
      ...[...this.#identityAgents.values()].map((agent) => agent.close()),
      this.#proxy?.pool.close(),
    ]);
  }

  #identityAgent(identity: TlsIdentity): Agent {
    const key = createHash("sha256")
      .update(identity.certificate)
      .update("\0")
      .update(identity.privateKey)
      .digest("hex");
    let agent = this.#identityAgents.get(key);
    if (agent) {
      this.#identityAgents.delete(key);
    } else {
      agent = this.#newAgent(identity);
      if (this.#identityAgents.size >= MAX_IDENTITY_AGENTS) {
        const [oldestKey, oldest] = this.#identityAgents.entries().next().value as [string, Agent];
        this.#identityAgents.delete(oldestKey);
        void oldest.close().catch(() => {});
      }
    }
    this.#identityAgents.set(key, agent);
    return agent;
  }

  #newAgent(identity: TlsIdentity | undefined): Agent {
    const tls = {
      ...(identity ? { cert: identity.certificate, key: identity.privateKey } : {}),
      ...(this.#options.trustedCertificates ? { ca: this.#options.trustedCertificates } : {}),
    };
    const proxy = this.#proxy;
    if (proxy === undefined) {
      return new Agent({
        keepAliveTimeout: 30_000,
        connect: {
          timeout: this.#connectTimeoutMs,
          ...(this.#lookup ? { lookup: this.#lookup } : {}),
          ...tls,
        },
      });
    }
    // Through the proxy, only https destinations reach this agent: a tunnel per connection.
    const tlsConnect = buildConnector({ timeout: this.#connectTimeoutMs, ...tls });
    return new Agent({
      keepAliveTimeout: 30_000,
      connect: (options, callback) => {
        this.#tunnel(proxy, options.hostname, Number(options.port) || 443).then(
          (socket) => tlsConnect({ ...options, httpSocket: socket }, callback),
          (error: Error) => callback(error, null),
        );
      },
    });
  }

  /** Opens a CONNECT tunnel through the proxy to the destination's checked address. */
  async #tunnel(proxy: Proxy, hostname: string, port: number): Promise<Socket> {
    const target = hostPort(await this.#checkedHost(hostname), port);
    let answer: Dispatcher.ConnectData;
    try {
      answer = await proxy.pool.connect({
        path: target,
        headers: {
          host: target,
          ...(proxy.authorization ? { "proxy-authorization": proxy.authorization } : {}),
        },
        signal: AbortSignal.timeout(this.#connectTimeoutMs),
      });
    } catch (error) {
      throw new EgressProxyError(`egress proxy ${describeProxyFailure(error, this.#connectTimeoutMs)}`, {
        cause: error,
      });
    }
    if (answer.statusCode !== 200) {
      answer.socket.on("error", () => {}).destroy();
      throw new EgressProxyError(`egress proxy refused the tunnel: ${statusText(answer.statusCode)}`);
    }
    return answer.socket as Socket;
  }

  /** Plain http through the proxy: the request line names the checked address, the Host header the name. */
  async #requestAbsoluteForm(proxy: Proxy, url: URL, request: EgressRequest): Promise<Dispatcher.ResponseData> {
    const host = hostPort(await this.#checkedHost(url.hostname), Number(url.port) || 80);
    let response: Dispatcher.ResponseData;
    try {
      response = await proxy.pool.request({
        path: `http://${host}${url.pathname}${url.search}`,
        method: request.method,
        headers: {
          ...request.headers,
          host: url.host,
          ...(proxy.authorization ? { "proxy-authorization": proxy.authorization } : {}),
        },
        body: request.body,
        signal: request.signal,
      });
    } catch (error) {
      // No answer from the proxy itself: its failure, unless our own time ran out meanwhile.
      if (request.signal.aborted) throw error;
      throw new EgressProxyError(`egress proxy ${describeProxyFailure(error, this.#connectTimeoutMs)}`, {
        cause: error,
      });
    }
    // Only a proxy answers 407. (A 502 or 504 may be the proxy's too, but a receiver may send
    // them as well, and nothing tells them apart: over http they count as the receiver's.)
    if (response.statusCode === 407) {
      await response.body.dump().catch(() => {});
      throw new EgressProxyError(`egress proxy refused the request: ${statusText(407)}`);
    }
    return response;
  }

  /**
   * The host to ask the proxy for: an IP literal as it is (the URL's check refused private ones),
   * a name resolved and checked here where destinations are checked, else the name.
   */
  async #checkedHost(hostname: string): Promise<string> {
    const bare = hostname.startsWith("[") ? hostname.slice(1, -1) : hostname;
    const lookup = this.#lookup;
    if (lookup === undefined || isIP(bare) !== 0) return bare;
    return new Promise((resolve, reject) => {
      lookup(bare, { all: false }, ((error: Error | null, address: string | LookupAddress[]) => {
        if (error) reject(error);
        else resolve(address as string);
      }) as never);
    });
  }
}

function hostPort(host: string, port: number): string {
  return `${host.includes(":") ? `[${host}]` : host}:${port}`;
}

const statusTexts: Record<number, string> = {
  400: "bad request",
  403: "forbidden",
  405: "method not allowed",
  407: "proxy authentication required",
  500: "internal server error",
  502: "bad gateway",
  503: "service unavailable",
  504: "gateway timeout",
};

function statusText(status: number): string {
  const text = statusTexts[status];
  return text ? `${status} (${text})` : String(status);
}

/** Why the proxy could not be used, in a few words. */
function describeProxyFailure(error: unknown, connectTimeoutMs: number): string {
  const err = error as { name?: string; code?: string; message?: string };
  if (err.name === "TimeoutError" || err.name === "AbortError" || err.code === "UND_ERR_CONNECT_TIMEOUT") {
    return `did not answer within ${connectTimeoutMs} ms`;
  }
  switch (err.code) {
    case "ECONNREFUSED":
      return "unreachable: connection refused";
    case "ECONNRESET":
    case "UND_ERR_SOCKET":
      return "closed the connection";
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return "unreachable: DNS lookup failed";
    default:
      return `failed: ${err.code ? `${err.code}: ` : ""}${(err.message ?? "request failed").slice(0, 200)}`;
  }
}
