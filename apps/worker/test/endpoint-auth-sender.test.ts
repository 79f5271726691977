import { type EndpointCredentials, SecretBox, sealCredentials } from "@webhooks/core";
import {
  createTestCa,
  freePort,
  type IssuedCertificate,
  startReceiver,
  startTokenServer,
  type TestCa,
  type TestReceiver,
  type TestTokenServer,
} from "@webhooks/testing";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { HttpSender } from "../src/http-sender.ts";

/**
 * Endpoint authentication as the sender applies it (docs/api.md#endpoint-authentication), with
 * real servers on loopback: a receiver that demands Basic credentials or a valid bearer token, a
 * token endpoint, and an HTTPS receiver that demands a client certificate from a test CA.
 */
const box = new SecretBox(Buffer.alloc(32, 9));
const policy = { allowHttp: true, allowPrivateNetworks: true };

let ca: TestCa;
let serverCertificate: IssuedCertificate;
const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});
beforeAll(async () => {
  ca = await createTestCa();
  serverCertificate = await ca.issueServer({ dns: ["localhost"], ip: ["127.0.0.1"] });
});

function newSender(timeoutMs = 5_000): HttpSender {
  const sender = new HttpSender({
    timeoutMs,
    policy,
    userAgent: "test",
    secretBox: box,
    trustedCertificates: [ca.certificate],
  });
  closers.push(() => sender.close());
  return sender;
}

let sealedCount = 0;
function sealed(credentials: EndpointCredentials) {
  sealedCount += 1;
  return { id: `cred_${sealedCount}`, ciphertext: new Uint8Array(sealCredentials(box, credentials)) };
}

async function receiver(reply?: TestReceiver["reply"], options?: Parameters<typeof startReceiver>[1]) {
  const started = await startReceiver(reply, options);
  closers.push(() => started.close());
  return started;
}

describe("basic auth", () => {
  it("sends Authorization: Basic, replacing an Authorization header the delivery had", async () => {
    const rx = await receiver();
    const credentials = sealed({
      auth: { type: "basic", username: "acme", password: "pä:ss word" },
      client_certificate: null,
    });
    const result = await newSender().send(`${rx.url}/x`, { Authorization: "Bearer stale" }, "{}", credentials);
    expect(result.responseCode).toBe(200);
    expect(rx.received[0]!.headers.authorization).toBe(`Basic ${Buffer.from("acme:pä:ss word").toString("base64")}`);
  });

  it("fails the attempt, sending nothing, when the credentials cannot be decrypted", async () => {
    const rx = await receiver();
    const other = new SecretBox(Buffer.alloc(32, 1));
    const credentials = {
      id: "cred_other_key",
      ciphertext: new Uint8Array(
        sealCredentials(other, { auth: { type: "basic", username: "a", password: "b" }, client_certificate: null }),
      ),
    };
    const result = await newSender().send(`${rx.url}/x`, {}, "{}", credentials);
    expect(result).toMatchObject({
      responseCode: null,
      error: "endpoint credentials could not be decrypted (check SECRET_ENCRYPTION_KEY)",
    });
    expect(rx.received).toEqual([]);
  });
});

describe("OAuth2 client credentials", () => {
  let tokens: TestTokenServer;
  let rx: TestReceiver;
  const auth = (overrides: Partial<Extract<EndpointCredentials["auth"], { type: "oauth2_client_credentials" }>> = {}) =>
    sealed({
      auth: {
        type: "oauth2_client_credentials",
        token_url: tokens.url,
        client_id: "acme client",
        client_secret: "s3cret&=+",
        ...overrides,
      },
      client_certificate: null,
    });

  async function start(): Promise<void> {
    tokens = await startTokenServer({ id: "acme client", secret: "s3cret&=+" });
    closers.push(() => tokens.close());
    rx = await receiver((webhook) => ({ status: tokens.isValid(webhook.headers.authorization) ? 200 : 401 }));
  }

  it("gets a token with client_secret_basic, scope and audience, and sends it as a bearer token", async () => {
    await start();
    const result = await newSender().send(
      `${rx.url}/x`,
      {},
      "{}",
      auth({ scope: "hooks:write", audience: "https://api.example" }),
    );
    expect(result).toMatchObject({ responseCode: 200, error: null });
    expect(tokens.requests).toEqual([
      expect.objectContaining({
        grantType: "client_credentials",
        scope: "hooks:write",
        audience: "https://api.example",
        client: { id: "acme client", secret: "s3cret&=+" },
      }),
    ]);
    expect(rx.received[0]!.headers.authorization).toBe("Bearer tok_1");
  });

  it("makes one token request for many attempts at once, and reuses the token after", async () => {
    await start();
    tokens.delayMs = 200;
    const sender = newSender();
    // Two credentials rows that hold the same OAuth2 client share the token.
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => sender.send(`${rx.url}/${i}`, {}, "{}", i % 2 === 0 ? auth() : auth())),
    );
    expect(results.map((result) => result.responseCode)).toEqual(Array(10).fill(200));
    expect(tokens.requests).toHaveLength(1);
    expect(tokens.maxConcurrent).toBe(1);
    expect((await sender.send(`${rx.url}/later`, {}, "{}", auth())).responseCode).toBe(200);
    expect(tokens.requests).toHaveLength(1);
  });

  it("drops a token the receiver refuses (401): that attempt fails, the next gets a new token", async () => {
    await start();
    const sender = newSender();
    const credentials = auth();
    expect((await sender.send(`${rx.url}/a`, {}, "{}", credentials)).responseCode).toBe(200);
    tokens.revokeAll();
    const refused = await sender.send(`${rx.url}/b`, {}, "{}", credentials);
    expect(refused).toMatchObject({ responseCode: 401, error: null });
    expect(tokens.requests).toHaveLength(1);
    const next = await sender.send(`${rx.url}/c`, {}, "{}", credentials);
    expect(next.responseCode).toBe(200);
    expect(tokens.requests).toHaveLength(2);
    expect(rx.received.map((webhook) => webhook.headers.authorization)).toEqual([
      "Bearer tok_1",
      "Bearer tok_1",
      "Bearer tok_2",
    ]);
  });

  it("fetches a new token shortly before the cached one expires", async () => {
    await start();
    // A token of 6 s is used for its first 3 (half its life, for one that short).
    tokens.expiresIn = 6;
    const sender = newSender();
    const credentials = auth();
    await sender.send(`${rx.url}/a`, {}, "{}", credentials);
    await sender.send(`${rx.url}/b`, {}, "{}", credentials);
    expect(tokens.requests).toHaveLength(1);
    await new Promise((resolve) => setTimeout(resolve, 3_100));
    await sender.send(`${rx.url}/c`, {}, "{}", credentials);
    expect(tokens.requests).toHaveLength(2);
    expect(rx.received.at(-1)!.headers.authorization).toBe("Bearer tok_2");
  });

  it("records a failed token request as the attempt's error, sending nothing to the receiver", async () => {
    await start();
    const sender = newSender(1_000);
    const wrongSecret = await sender.send(`${rx.url}/x`, {}, "{}", auth({ client_secret: "wrong" }));
    expect(wrongSecret).toMatchObject({
      responseCode: null,
      error: "OAuth2 token request failed: the token endpoint answered 401 (invalid_client)",
      timedOut: false,
    });
    tokens.failWith = { status: 503, error: "temporarily_unavailable" };
    expect((await sender.send(`${rx.url}/x`, {}, "{}", auth())).error).toBe(
      "OAuth2 token request failed: the token endpoint answered 503 (temporarily_unavailable)",
    );
    tokens.failWith = undefined;
    tokens.delayMs = 2_000;
    // The stats count a token request that ran out of time as a timeout, a refused one as a network error.
    expect(await sender.send(`${rx.url}/x`, {}, "{}", auth())).toMatchObject({
      error: "OAuth2 token request failed: timeout after 1000 ms",
      timedOut: true,
    });
    const down = auth({ token_url: `http://127.0.0.1:${await freePort()}/token` });
    expect(await sender.send(`${rx.url}/x`, {}, "{}", down)).toMatchObject({
      error: "OAuth2 token request failed: connection refused",
      timedOut: false,
    });
    const notJson = await receiver(() => ({ status: 200, body: "<html>login</html>" }));
    expect((await sender.send(`${rx.url}/x`, {}, "{}", auth({ token_url: `${notJson.url}/token` }))).error).toBe(
      "OAuth2 token request failed: the token endpoint's answer has no usable access_token",
    );
    expect(rx.received).toEqual([]);
  });
});

describe("the token endpoint's address", () => {
  it("is checked when connecting, as a webhook url's is: a name that rebinds to a private address is refused", async () => {
    const sender = new HttpSender({
      timeoutMs: 2_000,
      policy: { allowHttp: true, allowPrivateNetworks: false },
      userAgent: "test",
      secretBox: box,
      resolve: (hostname, callback) => callback(null, [{ address: "10.0.0.5", family: 4 }]),
    });
    closers.push(() => sender.close());
    const credentials = sealed({
      auth: {
        type: "oauth2_client_credentials",
        token_url: "https://auth.example.com/oauth/token",
        client_id: "a",
        client_secret: "b",
      },
      client_certificate: null,
    });
    // A public address that is never reached: the token request fails first.
    expect(await sender.send("https://93.184.215.14/x", {}, "{}", credentials)).toMatchObject({
      responseCode: null,
      error:
        "OAuth2 token request failed: destination not allowed: auth.example.com does not resolve to a public address",
    });
  });
});

describe("mutual TLS", () => {
  it("presents the client certificate to a receiver that demands one from its CA", async () => {
    const client = await ca.issueClient("acme-webhooks");
    const rx = await receiver(undefined, { tls: { ...serverCertificate, clientCa: ca.certificate } });
    const credentials = sealed({
      auth: { type: "basic", username: "acme", password: "pw" },
      client_certificate: { certificate: client.certificate, private_key: client.privateKey },
    });
    const result = await newSender().send(`${rx.url}/x`, {}, "{}", credentials);
    expect(result).toMatchObject({ responseCode: 200, error: null });
    expect(rx.received[0]).toMatchObject({ clientCertificateSubject: "acme-webhooks" });
    expect(rx.received[0]!.headers.authorization).toMatch(/^Basic /);
  });

  it("fails the attempt without a certificate, or with one from another CA", async () => {
    const rx = await receiver(undefined, { tls: { ...serverCertificate, clientCa: ca.certificate } });
    const sender = newSender();
    const without = await sender.send(`${rx.url}/x`, {}, "{}");
    expect(without.responseCode).toBeNull();
    expect(without.error).not.toBeNull();
    const stranger = await (await createTestCa("Another CA")).issueClient("stranger");
    const foreign = sealed({
      auth: null,
      client_certificate: { certificate: stranger.certificate, private_key: stranger.privateKey },
    });
    const refused = await sender.send(`${rx.url}/x`, {}, "{}", foreign);
    expect(refused.responseCode).toBeNull();
    expect(refused.error).not.toBeNull();
    expect(rx.received).toEqual([]);
  });
});
