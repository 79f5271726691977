import type { LookupAddress } from "node:dns";
import { type EndpointCredentials, SecretBox, sealCredentials } from "@webhooks/core";
import {
  createTestCa,
  freePort,
  type IssuedCertificate,
  startEgressProxy,
  startReceiver,
  startTokenServer,
  type TestCa,
  type TestEgressProxy,
} from "@webhooks/testing";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { HttpSender, type SenderOptions } from "../src/http-sender.ts";
import type { Resolver } from "../src/safe-lookup.ts";

/**
 * The egress proxy (docs/operations.md#egress-proxy-and-static-ips), with a real proxy, real
 * receivers and a real token endpoint on loopback. Where destinations are checked, names resolve
 * through a fake DNS to a public address, and the proxy routes that address to a loopback
 * receiver: what the proxy was asked for shows that the sender named the checked address.
 */
const PUBLIC_ADDRESS = "93.184.215.14";
const production = { allowHttp: true, allowPrivateNetworks: false };
const development = { allowHttp: true, allowPrivateNetworks: true };
const box = new SecretBox(Buffer.alloc(32, 7));

let ca: TestCa;
let serverCertificate: IssuedCertificate;
const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

beforeAll(async () => {
  ca = await createTestCa();
  serverCertificate = await ca.issueServer({ dns: ["hooks.example.com", "localhost"], ip: ["127.0.0.1"] });
});

function fakeDns(answers: Record<string, string[]>): Resolver {
  return (hostname, callback) => {
    const addresses = answers[hostname];
    if (!addresses) return callback(Object.assign(new Error(`ENOTFOUND ${hostname}`), { code: "ENOTFOUND" }), []);
    callback(
      null,
      addresses.map((address): LookupAddress => ({ address, family: address.includes(":") ? 6 : 4 })),
    );
  };
}

function newSender(options: Partial<SenderOptions> & Pick<SenderOptions, "policy">): HttpSender {
  const sender = new HttpSender({
    timeoutMs: 5_000,
    userAgent: "test",
    secretBox: box,
    trustedCertificates: [ca.certificate],
    ...options,
  });
  closers.push(() => sender.close());
  return sender;
}

async function proxy(): Promise<TestEgressProxy> {
  const started = await startEgressProxy();
  closers.push(() => started.close());
  return started;
}

function sealed(id: string, credentials: EndpointCredentials) {
  return { id, ciphertext: new Uint8Array(sealCredentials(box, credentials)) };
}

describe("through the egress proxy", () => {
  it("sends https through a CONNECT tunnel to the checked address, with the name as SNI and Host", async () => {
    const rx = await startReceiver(undefined, { tls: serverCertificate });
    closers.push(() => rx.close());
    const px = await proxy();
    const rxPort = Number(new URL(rx.url).port);
    px.route = (host, port) => (host === PUBLIC_ADDRESS ? { host: "127.0.0.1", port: rxPort } : { host, port });
    const sender = newSender({
      policy: production,
      proxyUrl: px.url,
      resolve: fakeDns({ "hooks.example.com": [PUBLIC_ADDRESS] }),
    });

    const result = await sender.send("https://hooks.example.com/in", { "webhook-id": "evt_1" }, "{}");

    expect(result).toMatchObject({ responseCode: 200, error: null });
    expect(px.requests).toEqual([
      {
        method: "CONNECT",
        target: `${PUBLIC_ADDRESS}:443`,
        host: `${PUBLIC_ADDRESS}:443`,
        proxyAuthorization: undefined,
      },
    ]);
    expect(rx.received).toHaveLength(1);
    expect(rx.received[0]!.headers.host).toBe("hooks.example.com");
    expect(rx.received[0]!.path).toBe("/in");
  });

  it("keeps the tunnel open for the next attempt to the same origin", async () => {
    const rx = await startReceiver(undefined, { tls: serverCertificate });
    closers.push(() => rx.close());
    const px = await proxy();
    const sender = newSender({ policy: development, proxyUrl: px.url });
    for (let i = 0; i < 6; i++) expect((await sender.send(`${rx.url}/x`, {}, "{}")).responseCode).toBe(200);
    // undici opens a second connection once, early on (its own ProxyAgent does the same); after
    // that, every attempt goes through a tunnel already open.
    expect(px.requests.length).toBeLessThanOrEqual(2);
    expect(rx.received).toHaveLength(6);
  });

  it("refuses a name that resolves to a private address before asking the proxy (DNS rebinding)", async () => {
    const px = await proxy();
    const sender = newSender({
      policy: production,
      proxyUrl: px.url,
      resolve: fakeDns({ "hooks.example.com": ["10.0.0.7"] }),
    });
    for (const url of ["https://hooks.example.com/in", "http://hooks.example.com/in"]) {
      const result = await sender.send(url, {}, "{}");
      expect(result.responseCode).toBeNull();
      expect(result.error).toBe("destination not allowed: hooks.example.com does not resolve to a public address");
    }
    expect(px.requests).toEqual([]);
  });

  it("sends plain http in absolute form naming the checked address, the Host header naming the name", async () => {
    const rx = await startReceiver();
    closers.push(() => rx.close());
    const px = await proxy();
    const rxPort = Number(new URL(rx.url).port);
    px.route = (host, port) => (host === PUBLIC_ADDRESS ? { host: "127.0.0.1", port: rxPort } : { host, port });
    const sender = newSender({
      policy: production,
      proxyUrl: px.url,
      resolve: fakeDns({ "hooks.example.com": [PUBLIC_ADDRESS] }),
    });

    const result = await sender.send("http://hooks.example.com:8080/in?a=1", {}, "{}");

    expect(result).toMatchObject({ responseCode: 200, error: null });
    expect(px.requests).toEqual([
      {
        method: "POST",
        target: `http://${PUBLIC_ADDRESS}:8080/in?a=1`,
        host: "hooks.example.com:8080",
        proxyAuthorization: undefined,
      },
    ]);
    expect(rx.received[0]!.path).toBe("/in?a=1");
  });

  it("sends the proxy's credentials from EGRESS_PROXY_URL, and says so when the proxy wants others (407)", async () => {
    const rx = await startReceiver();
    closers.push(() => rx.close());
    const px = await proxy();
    px.requireAuth = "egress:s3cr=t";
    const withCredentials = newSender({
      policy: development,
      proxyUrl: `http://egress:${encodeURIComponent("s3cr=t")}@127.0.0.1:${px.port}`,
    });
    expect((await withCredentials.send(`${rx.url}/a`, {}, "{}")).responseCode).toBe(200);
    expect(px.requests[0]!.proxyAuthorization).toBe(`Basic ${Buffer.from("egress:s3cr=t").toString("base64")}`);

    const without = newSender({ policy: development, proxyUrl: px.url });
    const plain = await without.send(`${rx.url}/b`, {}, "{}");
    expect(plain).toMatchObject({
      responseCode: null,
      error: "egress proxy refused the request: 407 (proxy authentication required)",
    });
    const tls = await startReceiver(undefined, { tls: serverCertificate });
    closers.push(() => tls.close());
    const tunnelled = await without.send(`${tls.url}/c`, {}, "{}");
    expect(tunnelled).toMatchObject({
      responseCode: null,
      error: "egress proxy refused the tunnel: 407 (proxy authentication required)",
    });
    expect(rx.received.map((webhook) => webhook.path)).toEqual(["/a"]);
    expect(tls.received).toEqual([]);
  });

  it("records a tunnel the proxy refuses, or a proxy it cannot reach, as the proxy's failure", async () => {
    const rx = await startReceiver(undefined, { tls: serverCertificate });
    closers.push(() => rx.close());
    const px = await proxy();
    const sender = newSender({ policy: development, proxyUrl: px.url });
    px.refuse = 403;
    expect((await sender.send(`${rx.url}/x`, {}, "{}")).error).toBe("egress proxy refused the tunnel: 403 (forbidden)");
    px.refuse = 502;
    expect((await sender.send(`${rx.url}/x`, {}, "{}")).error).toBe(
      "egress proxy refused the tunnel: 502 (bad gateway)",
    );

    const closed = newSender({ policy: development, proxyUrl: `http://127.0.0.1:${await freePort()}` });
    for (const url of [`${rx.url}/x`, "http://127.0.0.1:9/x"]) {
      expect(await closed.send(url, {}, "{}")).toMatchObject({
        responseCode: null,
        error: "egress proxy unreachable: connection refused",
      });
    }
    expect(rx.received).toEqual([]);
  });

  it("tells the receiver's failures apart from the proxy's: a refused connection behind the tunnel is a 502 of the proxy", async () => {
    const px = await proxy();
    const sender = newSender({ policy: development, proxyUrl: px.url });
    const result = await sender.send(`https://127.0.0.1:${await freePort()}/x`, {}, "{}");
    expect(result).toMatchObject({ responseCode: null, error: "egress proxy refused the tunnel: 502 (bad gateway)" });
  });

  it("presents the client certificate inside the tunnel (mutual TLS through the proxy)", async () => {
    const client = await ca.issueClient("acme-webhooks");
    const rx = await startReceiver(undefined, { tls: { ...serverCertificate, clientCa: ca.certificate } });
    closers.push(() => rx.close());
    const px = await proxy();
    const sender = newSender({ policy: development, proxyUrl: px.url });
    const credentials = sealed("cred_mtls", {
      auth: null,
      client_certificate: { certificate: client.certificate, private_key: client.privateKey },
    });
    expect((await sender.send(`${rx.url}/x`, {}, "{}", credentials)).responseCode).toBe(200);
    expect(rx.received[0]!.clientCertificateSubject).toBe("acme-webhooks");
    expect(px.requests).toHaveLength(1);
  });

  it("sends OAuth2 token requests through the proxy too, with the destination checks on the token url", async () => {
    const tokens = await startTokenServer({ id: "client", secret: "secret" });
    closers.push(() => tokens.close());
    const rx = await startReceiver((webhook) => ({
      status: tokens.isValid(webhook.headers.authorization) ? 200 : 401,
    }));
    closers.push(() => rx.close());
    const px = await proxy();
    const sender = newSender({ policy: development, proxyUrl: px.url });
    const credentials = sealed("cred_oauth", {
      auth: { type: "oauth2_client_credentials", token_url: tokens.url, client_id: "client", client_secret: "secret" },
      client_certificate: null,
    });
    expect((await sender.send(`${rx.url}/x`, {}, "{}", credentials)).responseCode).toBe(200);
    expect(px.requests.map((request) => request.target)).toEqual([tokens.url, `${rx.url}/x`]);

    const checked = newSender({
      policy: production,
      proxyUrl: px.url,
      resolve: fakeDns({ "auth.example.com": ["169.254.169.254"] }),
    });
    const refused = sealed("cred_refused", {
      auth: {
        type: "oauth2_client_credentials",
        token_url: "http://auth.example.com/token",
        client_id: "client",
        client_secret: "secret",
      },
      client_certificate: null,
    });
    expect(await checked.send(`http://${PUBLIC_ADDRESS}/x`, {}, "{}", refused)).toMatchObject({
      responseCode: null,
      error:
        "OAuth2 token request failed: destination not allowed: auth.example.com does not resolve to a public address",
    });
    expect(px.requests).toHaveLength(2);
  });
});
