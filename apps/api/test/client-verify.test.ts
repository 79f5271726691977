import { verifyWebhook, WebhookVerificationError } from "@webhooks/client";
import { type TestReceiver, waitFor } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { client, clientTest as test } from "./client-fixtures.ts";

/** The typed client's verifyWebhook on real webhooks from an ed25519 subscription (v1a, whpk_ keys). */

/** The webhooks the receiver got for an event, once it has `count` of them. */
const webhooksOf = (receiver: TestReceiver, eventId: string, count = 1) =>
  waitFor(
    () => {
      const received = receiver.received.filter((webhook) => webhook.headers["webhook-id"] === eventId);
      return received.length >= count ? received : undefined;
    },
    { what: `${count} webhook(s) of ${eventId}` },
  );

describe("the typed client, verifying ed25519 webhooks", () => {
  test("verifyWebhook: v1a with an ed25519 subscription's public key, either key during a rotation's overlap", async ({
    api,
    receiver,
  }) => {
    const created = await client(api).POST("/v1/subscriptions", {
      body: { url: `${receiver.url}/signed-ed25519`, events: ["client.ed25519"], signature_scheme: "ed25519" },
    });
    const publicKey = created.data!.public_key!;
    expect(publicKey).toMatch(/^whpk_/);
    const published = await client(api).POST("/v1/events", { body: { type: "client.ed25519", data: { n: 1 } } });
    const [webhook] = await webhooksOf(receiver, published.data!.id);
    expect(webhook!.headers["webhook-signature"]).toMatch(/^v1a,/);
    expect(verifyWebhook(publicKey, webhook!.headers, webhook!.body)).toEqual({
      type: "client.ed25519",
      timestamp: published.data!.created_at,
      data: { n: 1 },
    });
    // The raw body as a Buffer, and the headers as a fetch Headers, verify the same.
    const asHeaders = new Headers(webhook!.headers as Record<string, string>);
    expect(verifyWebhook(publicKey, asHeaders, Buffer.from(webhook!.body)).data).toEqual({ n: 1 });
    const refusals: [string, Record<string, string | string[] | undefined>, string][] = [
      ["No matching signature found", webhook!.headers, webhook!.body.replace("client.ed25519", "client.forged")],
      ["Missing required headers", { ...webhook!.headers, "webhook-signature": undefined }, webhook!.body],
      ["Message timestamp too old", { ...webhook!.headers, "webhook-timestamp": "1700000000" }, webhook!.body],
      [
        "No matching signature found",
        {
          ...webhook!.headers,
          "webhook-signature": String(webhook!.headers["webhook-signature"]).replace("v1a,", "v1,"),
        },
        webhook!.body,
      ],
    ];
    for (const [message, headers, body] of refusals) {
      expect(() => verifyWebhook(publicKey, headers, body), message).toThrow(new WebhookVerificationError(message));
    }
    // Another subscription's key does not verify it.
    const other = await client(api).POST("/v1/subscriptions", {
      body: { url: "https://example.com/hooks", events: ["a"], signature_scheme: "ed25519" },
    });
    expect(() => verifyWebhook(other.data!.public_key!, webhook!.headers, webhook!.body)).toThrow(
      WebhookVerificationError,
    );

    // During a rotation's overlap both keys sign: the old key and the new one each verify.
    const rotated = await client(api).POST("/v1/subscriptions/{subscription_id}/rotate_secret", {
      params: { path: { subscription_id: created.data!.id } },
      body: { overlap: "1h" },
    });
    const newKey = rotated.data!.public_key!;
    expect(newKey).not.toBe(publicKey);
    const again = await client(api).POST("/v1/events", { body: { type: "client.ed25519", data: { n: 2 } } });
    const [rotatedWebhook] = await webhooksOf(receiver, again.data!.id);
    expect(String(rotatedWebhook!.headers["webhook-signature"]).split(" ")).toHaveLength(2);
    for (const key of [newKey, publicKey]) {
      expect(verifyWebhook(key, rotatedWebhook!.headers, rotatedWebhook!.body).data).toEqual({ n: 2 });
    }
  });
});
