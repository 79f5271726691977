import { subscribeWithScheme } from "@webhooks/api/testing";
import { loadConfig } from "@webhooks/core";
import { connectRedis, waitUntilConnected } from "@webhooks/queue";
import { type ReceivedWebhook, startEgressProxy, startTokenServer, waitFor } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { workerTest as it } from "./fixtures.ts";
import { publish, type Stack, subscribe } from "./stack.ts";

// Signature schemes, endpoint authentication and the egress proxy end to end
// (docs/api.md#signature-schemes, docs/api.md#endpoint-authentication,
// docs/operations.md#egress-proxy-and-static-ips): the API, a worker and real servers on loopback.

const signatures = (webhook: ReceivedWebhook) => String(webhook.headers["webhook-signature"]).split(" ");

describe("ed25519", () => {
  it("signs v1a with the subscription's key, both keys during a rotation's overlap", async ({ stack, receiver }) => {
    const s = await stack();
    const rx = await receiver();
    const sub = await subscribeWithScheme(s.api, { url: `${rx.url}/hooks`, signature_scheme: "ed25519" });
    const firstKey = sub.public_key!;
    rx.secrets = [firstKey];
    await publish(s.api, { type: "invoice.paid", data: { n: 1 } });
    await waitFor(() => rx.received.length >= 1, { what: "the first webhook" });
    expect(signatures(rx.received[0]!)).toEqual([expect.stringMatching(/^v1a,[A-Za-z0-9+/]{86}==$/)]);
    expect(rx.received[0]!.signatureValid).toBe(true);

    const rotated = await s.api.call("POST", `/v1/subscriptions/${sub.id}/rotate_secret`, { json: { overlap: "1h" } });
    const secondKey: string = rotated.body.public_key;
    await publish(s.api, { type: "invoice.paid", data: { n: 2 } });
    await waitFor(() => rx.received.length >= 2, { what: "the webhook after the rotation" });
    const during = rx.received[1]!;
    expect(signatures(during)).toHaveLength(2);
    // Each key verifies it alone: the receiver may switch keys at any time during the overlap.
    for (const key of [firstKey, secondKey]) {
      rx.secrets = [key];
      rx.received.length = 0;
      await s.api.call("POST", `/v1/deliveries/${(await deliveryOf(s.api, sub.id, 2)).id}/retry`);
      await waitFor(() => rx.received.length >= 1, { what: "the resend" });
      expect(rx.received[0]!.signatureValid).toBe(true);
    }
  });
});

/** The subscription's delivery of the event with data.n = n. */
async function deliveryOf(api: Stack["api"], subscriptionId: string, n: number) {
  const list = await api.call("GET", `/v1/deliveries?subscription_id=${subscriptionId}&limit=100`);
  for (const delivery of list.body.data as { id: string; event_id: string }[]) {
    const event = await api.call("GET", `/v1/events/${delivery.event_id}`);
    if (event.body.data.n === n) return delivery;
  }
  throw new Error(`no delivery of event ${n}`);
}

describe("endpoint authentication", () => {
  it("uses the auth a delivery was created with, on every attempt, whatever the subscription says later", async ({
    stack,
    receiver,
  }) => {
    const s = await stack({ RETRY_SCHEDULE: "1s,1s,1s" });
    // Every first request of an event fails: its retry comes after the update.
    const seen = new Set<string>();
    const rx = await receiver((webhook) => {
      const id = String(webhook.headers["webhook-id"]);
      const first = !seen.has(id);
      seen.add(id);
      return { status: first ? 503 : 200 };
    });
    const sub = await subscribe(s.api, {
      url: `${rx.url}/hooks`,
      auth: { type: "basic", username: "acme", password: "first-password" },
    });
    const before = await publish(s.api, { type: "invoice.paid", data: { n: 1 } });
    await waitFor(() => rx.received.length >= 1, { what: "the first attempt" });
    const put = await s.api.call("PUT", `/v1/subscriptions/${sub.id}`, {
      json: { auth: { type: "basic", username: "acme", password: "second-password" } },
    });
    expect(put.status).toBe(200);
    const after = await publish(s.api, { type: "invoice.paid", data: { n: 2 } });
    await waitFor(() => rx.received.length >= 4, { what: "both deliveries, retried", timeoutMs: 10_000 });

    const basic = (password: string) => `Basic ${Buffer.from(`acme:${password}`).toString("base64")}`;
    const authorizationOf = (eventId: string) =>
      rx.received.filter((w) => w.headers["webhook-id"] === eventId).map((w) => w.headers.authorization);
    expect(authorizationOf(before.id)).toEqual([basic("first-password"), basic("first-password")]);
    expect(authorizationOf(after.id)).toEqual([basic("second-password"), basic("second-password")]);
  });

  it("gets an OAuth2 token once, and after the receiver refuses it (401) the retry gets a new one", async ({
    stack,
    receiver,
    defer,
  }) => {
    const tokens = await startTokenServer({ id: "acme", secret: "client-secret-XYZ" });
    defer(() => tokens.close());
    const rx = await receiver((webhook) => ({ status: tokens.isValid(webhook.headers.authorization) ? 200 : 401 }));
    const s = await stack({ RETRY_SCHEDULE: "300ms,300ms,300ms" });
    const sub = await subscribe(s.api, {
      url: `${rx.url}/hooks`,
      auth: {
        type: "oauth2_client_credentials",
        token_url: tokens.url,
        client_id: "acme",
        client_secret: "client-secret-XYZ",
      },
    });
    for (let n = 0; n < 5; n++) await publish(s.api, { type: "invoice.paid", data: { n } });
    await waitFor(() => rx.received.length >= 5, { what: "five webhooks" });
    expect(tokens.requests).toHaveLength(1);

    tokens.revokeAll();
    const event = await publish(s.api, { type: "invoice.paid", data: { n: 5 } });
    const delivered = await waitFor(
      async () => {
        const [delivery] = (await s.api.call("GET", `/v1/deliveries?subscription_id=${sub.id}&limit=1`)).body.data;
        return delivery?.event_id === event.id && delivery.status === "delivered" ? delivery : undefined;
      },
      { what: "the delivery, delivered after a 401" },
    );
    const attempts = (await s.api.call("GET", `/v1/deliveries/${delivered.id}/attempts`)).body.data;
    expect(attempts.map((a: { response_code: number }) => a.response_code).sort()).toEqual([200, 401]);
    expect(tokens.requests).toHaveLength(2);
  });

  it("records a failed token request as a failed attempt, and keeps the secrets out of Redis", async ({
    stack,
    receiver,
  }) => {
    const s = await stack({ RETRY_SCHEDULE: "1h" });
    const rx = await receiver();
    const sub = await subscribe(s.api, {
      url: `${rx.url}/hooks`,
      auth: {
        type: "oauth2_client_credentials",
        token_url: "http://127.0.0.1:9/token",
        client_id: "acme",
        client_secret: "client-secret-IN-NO-JOB",
      },
    });
    await publish(s.api, { type: "invoice.paid", data: { n: 1 } });
    const delivery = await waitFor(
      async () => {
        const [found] = (await s.api.call("GET", `/v1/deliveries?subscription_id=${sub.id}&limit=1`)).body.data;
        return found?.attempts === 1 && found.status === "failed" ? found : undefined;
      },
      { what: "the failed attempt" },
    );
    const [attempt] = (await s.api.call("GET", `/v1/deliveries/${delivery.id}/attempts`)).body.data;
    expect(attempt).toMatchObject({ response_code: null, error: "OAuth2 token request failed: connection refused" });
    expect(rx.received).toEqual([]);

    // Every key of the test's queue (the retry's job is there now), every value.
    const redis = connectRedis(loadConfig(s.env), "producer");
    try {
      await waitUntilConnected(redis);
      const keys = await redis.keys(`${s.env.QUEUE_PREFIX}*`);
      expect(keys.length).toBeGreaterThan(0);
      let read = "";
      for (const key of keys) {
        // Read as values, not DUMP, whose RDB format may compress them.
        const type = await redis.type(key);
        if (type === "hash") read += JSON.stringify(await redis.hgetall(key));
        else if (type === "string") read += await redis.get(key);
        else if (type === "list") read += JSON.stringify(await redis.lrange(key, 0, -1));
        else if (type === "zset") read += JSON.stringify(await redis.zrange(key, "0", "-1"));
        else if (type === "set") read += JSON.stringify(await redis.smembers(key));
        else if (type === "stream") read += JSON.stringify(await redis.xrange(key, "-", "+"));
      }
      // The delivery's job is there (it waits for its retry), with ids only.
      expect(read).toContain(delivery.id);
      expect(read).not.toContain("client-secret-IN-NO-JOB");
    } finally {
      redis.disconnect();
    }
  });
});

describe("the attempt log", () => {
  it("shows the headers an ed25519, basic-auth attempt sent: v1a and the authorization elided, in the order sent", async ({
    stack,
    receiver,
  }) => {
    const s = await stack();
    const rx = await receiver();
    const sub = await subscribeWithScheme(s.api, {
      url: `${rx.url}/hooks`,
      signature_scheme: "ed25519",
      headers: { "X-Region": "eu" },
      auth: { type: "basic", username: "acme", password: "pw-of-the-receiver" },
    });
    const event = await publish(s.api, { type: "invoice.paid", data: { n: 1 } });
    await waitFor(() => rx.received.length >= 1, { what: "the webhook" });
    const delivery = await deliveryOf(s.api, sub.id, 1);
    const log = await waitFor(
      async () => {
        const page = await s.api.call("GET", `/v1/deliveries/${delivery.id}/attempts`);
        const [attempt] = page.body.data as { duration_ms: number | null; request_headers: Record<string, string> }[];
        return attempt?.duration_ms === null ? undefined : attempt;
      },
      { what: "the recorded attempt" },
    );
    const webhook = rx.received[0]!;
    expect(webhook.headers["webhook-id"]).toBe(event.id);
    const sent = Object.keys(webhook.headers).filter(
      (name) => !["host", "connection", "content-length"].includes(name),
    );
    expect(Object.keys(log!.request_headers).map((name) => name.toLowerCase())).toEqual(sent);
    expect(log!.request_headers).toMatchObject({ "webhook-signature": "v1a,…", authorization: "Basic …" });
    expect(String(webhook.headers.authorization)).toMatch(/^Basic /);
    expect(signatures(webhook)[0]).toMatch(/^v1a,/);
    expect(JSON.stringify(log)).not.toMatch(/pw-of-the-receiver|YWNtZT/);
  });
});

describe("egress proxy", () => {
  it("sends every attempt through EGRESS_PROXY_URL", async ({ stack, receiver, defer }) => {
    const proxy = await startEgressProxy();
    defer(() => proxy.close());
    const rx = await receiver();
    const s = await stack({ EGRESS_PROXY_URL: proxy.url });
    await subscribe(s.api, { url: `${rx.url}/hooks` });
    await publish(s.api, { type: "invoice.paid", data: { n: 1 } });
    await waitFor(() => rx.received.length >= 1, { what: "the webhook" });
    expect(proxy.requests).toEqual([expect.objectContaining({ method: "POST", target: `${rx.url}/hooks` })]);
  });
});
