import { Webhook, WebhookVerificationError } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { newId } from "../src/ids.ts";
import { decodeSigningSecret, generateSigningSecret, type SignedHeaders, signWebhook } from "../src/signing.ts";

const secretFormat = /^whsec_[A-Za-z0-9+/]{43}=$/;

/** Signs `body` now with a fresh secret, the way the worker does for one attempt. */
function signNow(body: string, messageId = newId("event")): { secret: string; headers: SignedHeaders } {
  const secret = generateSigningSecret();
  const headers = signWebhook({ secretKeys: [decodeSigningSecret(secret)], messageId, timestamp: new Date(), body });
  return { secret, headers };
}

describe("generateSigningSecret", () => {
  it("is whsec_ and the base64 of 32 bytes", () => {
    const secret = generateSigningSecret();
    expect(secret).toMatch(secretFormat);
    expect(Buffer.from(secret.slice("whsec_".length), "base64")).toHaveLength(32);
  });

  it("is different every time", () => {
    const secrets = Array.from({ length: 1_000 }, () => generateSigningSecret());
    expect(new Set(secrets).size).toBe(secrets.length);
    for (const secret of secrets) expect(secret).toMatch(secretFormat);
  });

  it("is accepted by the standardwebhooks package", () => {
    expect(() => new Webhook(generateSigningSecret())).not.toThrow();
  });
});

describe("decodeSigningSecret", () => {
  it("decodes the base64 after the whsec_ prefix", () => {
    const key = Buffer.from(Array.from({ length: 32 }, (_, i) => i));
    expect(decodeSigningSecret(`whsec_${key.toString("base64")}`).equals(key)).toBe(true);
  });

  it("decodes a bare base64 secret too", () => {
    const key = Buffer.from(Array.from({ length: 32 }, (_, i) => 255 - i));
    expect(decodeSigningSecret(key.toString("base64")).equals(key)).toBe(true);
  });
});

describe("signWebhook", () => {
  it("matches the Standard Webhooks reference vector", () => {
    // The test vector of the standard-webhooks specification and its libraries.
    const headers = signWebhook({
      secretKeys: [decodeSigningSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")],
      messageId: "msg_p5jXN8AQM9LWM0D4loKWxJek",
      timestamp: new Date(1614265330 * 1000),
      body: '{"test": 2432232314}',
    });
    expect(headers).toEqual({
      "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
      "webhook-timestamp": "1614265330",
      "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    });
  });

  it("puts the unix time in whole seconds in webhook-timestamp", () => {
    const sign = (timestamp: Date) =>
      signWebhook({ secretKeys: [Buffer.alloc(32, 1)], messageId: "evt_1", timestamp, body: "{}" })[
        "webhook-timestamp"
      ];
    expect(sign(new Date("2026-11-21T23:36:50.999Z"))).toBe("1795304210");
    expect(sign(new Date("2026-11-21T23:36:50.000Z"))).toBe("1795304210");
    expect(sign(new Date("2026-11-21T23:36:51.000Z"))).toBe("1795304211");
  });

  it("uses the message id as webhook-id", () => {
    const messageId = newId("event");
    expect(signNow("{}", messageId).headers["webhook-id"]).toBe(messageId);
  });

  it("signs the same input the same way as the standardwebhooks package", () => {
    const secret = generateSigningSecret();
    const timestamp = new Date("2026-11-21T23:36:50.123Z");
    const body = JSON.stringify({ type: "invoice.paid", data: { amount: 42 } });
    const headers = signWebhook({ secretKeys: [decodeSigningSecret(secret)], messageId: "evt_x", timestamp, body });
    expect(headers["webhook-signature"]).toBe(new Webhook(secret).sign("evt_x", timestamp, body));
  });

  it("signs with every key, the first key's signature first, and either secret verifies", () => {
    const current = generateSigningSecret();
    const previous = generateSigningSecret();
    const body = JSON.stringify({ type: "invoice.paid", data: { amount: 42 } });
    const timestamp = new Date();
    const headers = signWebhook({
      secretKeys: [decodeSigningSecret(current), decodeSigningSecret(previous)],
      messageId: "evt_r",
      timestamp,
      body,
    });
    expect(headers["webhook-signature"]).toBe(
      `${new Webhook(current).sign("evt_r", timestamp, body)} ${new Webhook(previous).sign("evt_r", timestamp, body)}`,
    );
    expect(new Webhook(current).verify(body, { ...headers })).toEqual(JSON.parse(body));
    expect(new Webhook(previous).verify(body, { ...headers })).toEqual(JSON.parse(body));
    expect(() => new Webhook(generateSigningSecret()).verify(body, { ...headers })).toThrow(WebhookVerificationError);
  });

  it("refuses to sign without a key", () => {
    expect(() => signWebhook({ secretKeys: [], messageId: "evt_1", timestamp: new Date(), body: "{}" })).toThrow();
  });

  const bodies: [string, string][] = [
    [
      "a small event",
      JSON.stringify({
        type: "invoice.paid",
        timestamp: "2026-11-21T23:36:50.123Z",
        data: { id: "in_1", amount: 4200 },
      }),
    ],
    ["an empty object", "{}"],
    [
      "accents, CJK and emoji",
      JSON.stringify({ type: "user.created", data: { name: "Zoë Ünal 张伟 🎉", note: "naïve café" } }),
    ],
    [
      "escaped unicode and control characters",
      JSON.stringify({ data: { text: 'line\nbreak\ttab \u0000 \u2028 \\ "quoted"' } }),
    ],
    ["astral-plane characters", JSON.stringify({ data: { math: "𝔘𝔫𝔦𝔠𝔬𝔡𝔢" } })],
    [
      "a large body",
      JSON.stringify({ data: { blob: "x".repeat(200_000), list: Array.from({ length: 1_000 }, (_, i) => i) } }),
    ],
    ["pretty-printed JSON", JSON.stringify({ type: "a.b", data: { nested: { deep: [1, 2, 3] } } }, null, 2)],
  ];

  it.each(bodies)("is verified by the standardwebhooks package for %s", (_case, body) => {
    const { secret, headers } = signNow(body);
    expect(new Webhook(secret).verify(body, { ...headers })).toEqual(JSON.parse(body));
  });

  it("is verified for a body that is not JSON", () => {
    const body = "plain text ✓";
    const { secret, headers } = signNow(body);
    expect(() => new Webhook(secret).verify(body, { ...headers }, { jsonParse: false })).not.toThrow();
  });

  it("is verified as a Buffer body, as a receiver reading raw bytes sees it", () => {
    const body = JSON.stringify({ data: { name: "Zoë 🎉" } });
    const { secret, headers } = signNow(body);
    expect(new Webhook(secret).verify(Buffer.from(body, "utf8"), { ...headers })).toEqual(JSON.parse(body));
  });

  describe("tampering", () => {
    const body = JSON.stringify({ type: "invoice.paid", data: { amount: 4200, currency: "eur" } });

    function expectRejected(secret: string, payload: string, headers: Record<string, string>): void {
      expect(() => new Webhook(secret).verify(payload, headers)).toThrow(WebhookVerificationError);
    }

    it("fails when one character of the body changes", () => {
      const { secret, headers } = signNow(body);
      expectRejected(secret, body.replace("4200", "4201"), { ...headers });
      expectRejected(secret, `${body} `, { ...headers });
      expectRejected(secret, body.replace("eur", "eür"), { ...headers });
    });

    it("fails when the timestamp changes by one second", () => {
      const { secret, headers } = signNow(body);
      const earlier = String(Number(headers["webhook-timestamp"]) - 1);
      expectRejected(secret, body, { ...headers, "webhook-timestamp": earlier });
    });

    it("fails when the message id changes", () => {
      const { secret, headers } = signNow(body);
      expectRejected(secret, body, { ...headers, "webhook-id": newId("event") });
    });

    it("fails with another secret", () => {
      const { headers } = signNow(body);
      expectRejected(generateSigningSecret(), body, { ...headers });
    });

    it("fails when the signature bytes are altered", () => {
      const { secret, headers } = signNow(body);
      const signature = headers["webhook-signature"]; // "v1," + base64
      const swapped = signature[10] === "A" ? "B" : "A";
      expectRejected(secret, body, {
        ...headers,
        "webhook-signature": `${signature.slice(0, 10)}${swapped}${signature.slice(11)}`,
      });
    });
  });
});
