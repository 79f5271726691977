import { subscribe, subscribeWithScheme, type TestApi } from "@webhooks/api/testing";
import { createTestCa, type IssuedCertificate, sql, type TestCa } from "@webhooks/testing";
import { beforeAll, describe, expect } from "vitest";
import { createdSubscriptionSchema, subscriptionListSchema, subscriptionSchema } from "../src/subscriptions/schemas.ts";
import { apiTest } from "./fixtures.ts";

// Signature schemes and endpoint authentication through the API alone
// (docs/api.md#signature-schemes, docs/api.md#endpoint-authentication). What the worker does with
// them is in apps/worker/test/endpoint-auth*.test.ts.

const test = apiTest();
const productionTest = apiTest({ env: { ALLOW_PRIVATE_DESTINATIONS: "false" } });

let ca: TestCa;
let client: IssuedCertificate;
beforeAll(async () => {
  ca = await createTestCa();
  client = await ca.issueClient("acme-webhooks");
});

const basic = { type: "basic", username: "acme", password: "pw-NEVER-SHOWN-1" } as const;
const oauth2 = {
  type: "oauth2_client_credentials",
  token_url: "https://auth.example.com/oauth/token",
  client_id: "acme",
  client_secret: "cs-NEVER-SHOWN-2",
  scope: "hooks:write",
} as const;

async function everyRead(api: TestApi, id: string): Promise<string> {
  const one = await api.get(`/v1/subscriptions/${id}`, 200, { schema: subscriptionSchema });
  const list = await api.get("/v1/subscriptions?limit=100", 200, { schema: subscriptionListSchema });
  return JSON.stringify([one.body, list.body]);
}

describe("signature_scheme", () => {
  test("hmac-sha256 is the default: a secret once, no public key", async ({ api }) => {
    const created = await subscribe(api);
    expect(created).toMatchObject({ signature_scheme: "hmac-sha256", public_key: null });
    expect(created.secret).toMatch(/^whsec_/);
  });

  test("ed25519: no secret in the response, the public key on every read", async ({ api, database }) => {
    const created = await subscribeWithScheme(api, { signature_scheme: "ed25519" });
    expect(created.signature_scheme).toBe("ed25519");
    expect(created).not.toHaveProperty("secret");
    expect(created.public_key).toMatch(/^whpk_[A-Za-z0-9+/]{43}=$/);
    const one = await api.get(`/v1/subscriptions/${created.id}`, 200, { schema: subscriptionSchema });
    expect(one.body).toMatchObject({ signature_scheme: "ed25519", public_key: created.public_key });
    const list = await api.get("/v1/subscriptions?limit=100", 200, { schema: subscriptionListSchema });
    expect(list.body.data.find((s: { id: string }) => s.id === created.id)).toMatchObject({
      public_key: created.public_key,
    });
    // The private key is stored sealed, never as the text it is.
    const [row] = await sql<{ ciphertext: Buffer }>(
      database.url,
      "SELECT s.ciphertext FROM signing_secrets s JOIN subscriptions sub ON sub.secret_id = s.id WHERE sub.id = $1",
      [created.id],
    );
    expect(row!.ciphertext.toString("latin1")).not.toContain("whsk_");
  });

  test("rotate_secret replaces the key pair: no secret, the new public key", async ({ api }) => {
    const created = await subscribeWithScheme(api, { signature_scheme: "ed25519" });
    const rotated = await api.post(`/v1/subscriptions/${created.id}/rotate_secret`, { overlap: "1h" }, 200, {
      schema: createdSubscriptionSchema,
    });
    expect(rotated.body).not.toHaveProperty("secret");
    expect(rotated.body.public_key).toMatch(/^whpk_/);
    expect(rotated.body.public_key).not.toBe(created.public_key);
    const read = await api.get(`/v1/subscriptions/${created.id}`, 200, { schema: subscriptionSchema });
    expect(read.body.public_key).toBe(rotated.body.public_key);
  });

  test("is set at create only, and must be one of the two", async ({ api }) => {
    const created = await subscribe(api);
    for (const field of ["signature_scheme", "public_key"]) {
      const response = await api.put(`/v1/subscriptions/${created.id}`, { [field]: "ed25519" }, 400);
      expect(response.body.error).toMatchObject({ code: "parameter_not_updatable", param: field });
    }
    const bad = await api.post(
      "/v1/subscriptions",
      { url: "https://example.com", events: ["*"], signature_scheme: "rsa" },
      400,
    );
    expect(bad.body.error).toMatchObject({
      code: "parameter_invalid",
      param: "signature_scheme",
      message: 'signature_scheme must be "hmac-sha256" or "ed25519"',
    });
  });
});

describe("auth", () => {
  test("basic: the password is write-only and stored sealed", async ({ api, database }) => {
    const created = await subscribe(api, { auth: basic });
    expect(created.auth).toEqual({ type: "basic", username: "acme" });
    expect(JSON.stringify(created)).not.toContain(basic.password);
    expect(await everyRead(api, created.id)).not.toContain(basic.password);
    const tables = await sql<{ dump: string }>(
      database.url,
      `SELECT (SELECT string_agg(encode(ciphertext, 'escape'), '') FROM endpoint_credentials)
              || (SELECT string_agg(row_to_json(s)::text, '') FROM subscriptions s) AS dump`,
    );
    expect(tables[0]!.dump).not.toContain(basic.password);
  });

  test("oauth2_client_credentials: reads show all but the client secret", async ({ api }) => {
    const created = await subscribe(api, { auth: oauth2 });
    expect(created.auth).toEqual({
      type: "oauth2_client_credentials",
      token_url: oauth2.token_url,
      client_id: "acme",
      scope: "hooks:write",
      audience: null,
    });
    expect(await everyRead(api, created.id)).not.toContain(oauth2.client_secret);
  });

  test.for<[unknown, string, string]>([
    [{ type: "digest", username: "a", password: "b" }, "parameter_invalid", "auth.type"],
    [{ type: "basic", username: "a" }, "parameter_missing", "auth.password"],
    [{ type: "basic", username: "a:b", password: "c" }, "parameter_invalid", "auth.username"],
    [{ type: "basic", username: "a", password: "" }, "parameter_invalid", "auth.password"],
    [{ type: "basic", username: "a", password: "b\nc" }, "parameter_invalid", "auth.password"],
    [{ type: "basic", username: "a", password: "b", realm: "x" }, "parameter_unknown", "auth.realm"],
    [{ ...oauth2, client_secret: undefined }, "parameter_missing", "auth.client_secret"],
    [{ ...oauth2, token_url: "ftp://auth.example.com/token" }, "url_invalid", "auth.token_url"],
    [{ ...oauth2, token_url: "https://user:pw@auth.example.com/token" }, "url_invalid", "auth.token_url"],
    [{ ...oauth2, scope: 'a "b"' }, "parameter_invalid", "auth.scope"],
    ["basic", "parameter_invalid", "auth"],
  ])("refuses auth %j with a 400 naming the field", async ([auth, code, param], { api }) => {
    const response = await api.post("/v1/subscriptions", { url: "https://example.com", events: ["*"], auth }, 400);
    expect(response.body.error).toMatchObject({ type: "invalid_request_error", code, param });
  });

  productionTest("token_url passes the same egress checks as a webhook url", async ({ api }) => {
    for (const tokenUrl of ["https://169.254.169.254/token", "https://localhost/token", "https://[::1]/token"]) {
      const response = await api.post(
        "/v1/subscriptions",
        { url: "https://example.com", events: ["*"], auth: { ...oauth2, token_url: tokenUrl } },
        400,
      );
      expect(response.body.error).toMatchObject({
        code: "url_invalid",
        param: "auth.token_url",
        message: "auth.token_url must not point to a private, loopback or link-local address",
      });
    }
  });

  test("cannot be set beside an Authorization header of the subscription's own", async ({ api }) => {
    const both = await api.post(
      "/v1/subscriptions",
      { url: "https://example.com", events: ["*"], auth: basic, headers: { Authorization: "Bearer x" } },
      400,
    );
    expect(both.body.error).toMatchObject({ code: "parameter_invalid", param: "headers.Authorization" });
    const withHeader = await subscribe(api, { headers: { authorization: "Bearer x" } });
    const put = await api.put(`/v1/subscriptions/${withHeader.id}`, { auth: basic }, 400);
    expect(put.body.error).toMatchObject({ param: "headers.authorization" });
    const replaced = await api.put(`/v1/subscriptions/${withHeader.id}`, { auth: basic, headers: {} }, 200, {
      schema: subscriptionSchema,
    });
    expect(replaced.body).toMatchObject({ auth: { type: "basic" }, headers: {} });
  });
});

describe("client_certificate", () => {
  test("is checked, write-only for its key, and read back as fingerprint and expiry", async ({ api }) => {
    const created = await subscribe(api, {
      client_certificate: { certificate: client.certificate, private_key: client.privateKey },
    });
    expect(created.client_certificate).toEqual({
      fingerprint_sha256: expect.stringMatching(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/),
      not_after: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
    const keyBody = client.privateKey.split("\n")[1]!;
    expect(JSON.stringify(created)).not.toContain(keyBody);
    expect(await everyRead(api, created.id)).not.toContain(keyBody);
  });

  test("refuses an expired certificate, a key of another, and what is not PEM, naming the field", async ({ api }) => {
    const expired = await ca.issueClient("old", {
      notBefore: new Date(Date.now() - 10 * 86_400_000),
      notAfter: new Date(Date.now() - 86_400_000),
    });
    const other = await ca.issueClient("other");
    const cases: [unknown, string, RegExp][] = [
      [
        { certificate: expired.certificate, private_key: expired.privateKey },
        "client_certificate.certificate",
        /^client_certificate\.certificate has expired \(not after \d{4}-/,
      ],
      [
        { certificate: client.certificate, private_key: other.privateKey },
        "client_certificate.private_key",
        /^client_certificate\.private_key does not belong to the certificate$/,
      ],
      [
        { certificate: "not a certificate", private_key: client.privateKey },
        "client_certificate.certificate",
        /must be a PEM-encoded X\.509 certificate/,
      ],
      [
        {
          certificate: client.certificate,
          private_key: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----",
        },
        "client_certificate.private_key",
        /must be an unencrypted PEM-encoded private key/,
      ],
      [{ certificate: client.certificate }, "client_certificate.private_key", /required/],
    ];
    for (const [clientCertificate, param, message] of cases) {
      const response = await api.post(
        "/v1/subscriptions",
        { url: "https://example.com", events: ["*"], client_certificate: clientCertificate },
        400,
      );
      expect(response.body.error).toMatchObject({ param, message: expect.stringMatching(message) });
      expect(response.body.error.message).not.toContain("PRIVATE KEY");
    }
  });
});

describe("PUT", () => {
  test("replaces auth and certificate apart, each keeping the other; null removes them", async ({ api, database }) => {
    const created = await subscribe(api, {
      auth: basic,
      client_certificate: { certificate: client.certificate, private_key: client.privateKey },
    });
    const fingerprint = created.client_certificate!.fingerprint_sha256;
    const credentialsOf = async () =>
      (
        await sql<{ credentials_id: string | null }>(
          database.url,
          "SELECT credentials_id FROM subscriptions WHERE id = $1",
          [created.id],
        )
      )[0]!.credentials_id;
    const first = await credentialsOf();

    const authChanged = await api.put(`/v1/subscriptions/${created.id}`, { auth: oauth2 }, 200, {
      schema: subscriptionSchema,
    });
    expect(authChanged.body.auth).toMatchObject({ type: "oauth2_client_credentials", client_id: "acme" });
    expect(authChanged.body.client_certificate?.fingerprint_sha256).toBe(fingerprint);
    const second = await credentialsOf();
    // A new row: deliveries created before keep the first (docs/api.md#updates-apply-to-the-next-delivery).
    expect(second).not.toBe(first);

    const certificateRemoved = await api.put(`/v1/subscriptions/${created.id}`, { client_certificate: null }, 200, {
      schema: subscriptionSchema,
    });
    expect(certificateRemoved.body).toMatchObject({
      auth: { type: "oauth2_client_credentials" },
      client_certificate: null,
    });

    const unrelated = await api.put(`/v1/subscriptions/${created.id}`, { events: ["a.b"] }, 200, {
      schema: subscriptionSchema,
    });
    expect(unrelated.body.auth).toMatchObject({ type: "oauth2_client_credentials" });

    const none = await api.put(`/v1/subscriptions/${created.id}`, { auth: null }, 200, { schema: subscriptionSchema });
    expect(none.body).toMatchObject({ auth: null, client_certificate: null });
    expect(await credentialsOf()).toBeNull();
    expect(JSON.stringify(none.body)).not.toContain(oauth2.client_secret);
  });
});
