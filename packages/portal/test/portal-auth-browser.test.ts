// An endpoint's authentication, client certificate and signature scheme in the portal
// (docs/portal.md#authentication, docs/portal.md#signatures): set and replaced from the page,
// refusals in the customer's words, and no secret ever in the page.
import { createTestCa, type IssuedCertificate } from "@webhooks/testing";
import { beforeAll, describe, expect, it } from "vitest";
import { ApiError } from "../src/page/api.ts";
import { explain } from "../src/page/problems.ts";
import { accessibilityProblems, headersShown, portalHarness, TENANT } from "./browser.ts";
import type { PortalStack } from "./stack.ts";

const harness = portalHarness(() => ({ status: 200, body: "thanks" }));
const { openBrowser, portalLink, expectSelfContained, shot, createEndpoint } = harness;
let stack: PortalStack;
let certificate: IssuedCertificate;
let otherCertificate: IssuedCertificate;
let expiredCertificate: IssuedCertificate;
beforeAll(async () => {
  stack = harness.stack;
  const ca = await createTestCa();
  certificate = await ca.issueClient("acme-webhooks");
  otherCertificate = await ca.issueClient("someone-else");
  const day = 86_400_000;
  expiredCertificate = await ca.issueClient("expired", {
    notBefore: new Date(Date.now() - 20 * day),
    notAfter: new Date(Date.now() - 10 * day),
  });
});

const PASSWORD = "pw-NEVER-IN-PAGE-7a1";
const CLIENT_SECRET = "cs-NEVER-IN-PAGE-9b2";

/** The page's HTML has none of the secrets, nor a private key. */
async function expectNoSecrets(html: string): Promise<void> {
  expect(html).not.toContain(PASSWORD);
  expect(html).not.toContain(CLIENT_SECRET);
  expect(html).not.toContain("PRIVATE KEY");
  const keyBody = certificate.privateKey.split("\n")[1]!;
  expect(html).not.toContain(keyBody);
}

let token: string | undefined;
async function sessionToken(): Promise<string> {
  token ??= (await stack.call("POST", "/v1/portal_sessions", { tenant_id: TENANT, expires_in: "1h" })).body.token;
  return token!;
}

/** The API's answer to a bad PUT of an endpoint, as the portal explains it. */
async function explained(body: Record<string, unknown>) {
  const id = await createEndpoint("https://example.com/words", ["*"]);
  const response = await fetch(`${stack.baseUrl}/v1/subscriptions/${id}`, {
    method: "PUT",
    headers: { authorization: `Bearer ${await sessionToken()}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const { error } = (await response.json()) as { error: { message: string; param?: string; code?: string } };
  expect(response.status, error.message).toBe(400);
  return explain(new ApiError(response.status, error.message, error.param, undefined, error.code), body);
}

const basic = (fields: Record<string, unknown>) => ({
  auth: { type: "basic", username: "acme", password: "pw", ...fields },
});
const oauth = (fields: Record<string, unknown>) => ({
  auth: {
    type: "oauth2_client_credentials",
    token_url: "https://auth.example.com/token",
    client_id: "acme",
    client_secret: "cs",
    ...fields,
  },
});

describe("problems with authentication, in the customer's words", () => {
  // Asked of the real API: if its wording changes, these fail rather than show its words.
  it.each([
    ["auth.username", /^Enter the user name\.$/, () => basic({ username: "" })],
    ["auth.username", /^The user name cannot contain a colon/, () => basic({ username: "a:b" })],
    ["auth.username", /^The user name cannot contain line breaks/, () => basic({ username: "a\u0001" })],
    ["auth.username", /^The user name is too long: 255 characters/, () => basic({ username: "a".repeat(256) })],
    ["auth.password", /^Enter the password\. We never show a saved one/, () => basic({ password: "" })],
    ["auth.password", /^The password is too long: 1,024 characters/, () => basic({ password: "p".repeat(1025) })],
    ["auth.token_url", /^Enter the full address of your token endpoint/, () => oauth({ token_url: "" })],
    ["auth.token_url", /^Enter the full address of your token/, () => oauth({ token_url: "ftp://auth.example.com/" })],
    [
      "auth.token_url",
      /^Take the user name and password out of the token URL/,
      () => oauth({ token_url: "https://u:p@auth.example.com/" }),
    ],
    ["auth.client_id", /^Enter the client ID\.$/, () => oauth({ client_id: "" })],
    ["auth.client_secret", /^Enter the client secret\. We never show/, () => oauth({ client_secret: "" })],
    ["auth.scope", /^The scope is a list of names separated by single spaces/, () => oauth({ scope: 'a"b' })],
    ["auth.audience", /^The audience is too long: 2,048 characters/, () => oauth({ audience: "a".repeat(2049) })],
    [
      "client_certificate.certificate",
      /^This is not a certificate we can read\. Paste it in PEM form/,
      () => ({ client_certificate: { certificate: "not a certificate", private_key: certificate.privateKey } }),
    ],
    [
      "client_certificate.certificate",
      /^This certificate expired on .+\. Paste one that is valid now\.$/,
      () => ({
        client_certificate: { certificate: expiredCertificate.certificate, private_key: expiredCertificate.privateKey },
      }),
    ],
    [
      "client_certificate.private_key",
      /^This is not a private key we can read/,
      () => ({ client_certificate: { certificate: certificate.certificate, private_key: "not a key" } }),
    ],
    [
      "client_certificate.private_key",
      /^This private key does not belong to the certificate/,
      () => ({
        client_certificate: { certificate: certificate.certificate, private_key: otherCertificate.privateKey },
      }),
    ],
    [
      "headers",
      /^The endpoint's authentication sends its own Authorization header/,
      () => ({ ...basic({}), headers: { Authorization: "Bearer x" } }),
    ],
  ])("by %s: %s", async (field, message, body) => {
    const problem = await explained(body());
    expect(problem.field).toBe(field);
    expect(problem.message).toMatch(message);
  });

  it("words a token URL that a production deployment refuses", async () => {
    const production = await stack.startApi({ ALLOW_HTTP_URLS: "false", ALLOW_PRIVATE_DESTINATIONS: "false" });
    const words = async (tokenUrl: string) => {
      const response = await fetch(`${production}/v1/subscriptions`, {
        method: "POST",
        headers: { authorization: `Bearer ${await sessionToken()}`, "content-type": "application/json" },
        body: JSON.stringify({ url: "https://example.com/hooks", events: ["*"], ...oauth({ token_url: tokenUrl }) }),
      });
      const { error } = await response.json();
      return explain(new ApiError(response.status, error.message, error.param, undefined, error.code));
    };
    expect((await words("http://auth.example.com/token")).message).toMatch(/^Use a token URL that starts with https/);
    expect((await words("https://10.0.0.1/token")).message).toMatch(/^This token URL is on a private network/);
  });
});

describe("an endpoint's authentication in the page", () => {
  it("sets basic auth, then OAuth2, then none; shows what is set, never the secrets; webhooks carry it", async () => {
    const id = await createEndpoint(`${stack.receiver.url}/signed-in`, ["*"]);
    const session = await openBrowser();
    const { page } = session;
    await page.goto(await portalLink());
    await page.goto(`${stack.baseUrl}/portal#/endpoints/${id}`);
    const section = page.getByRole("region", { name: "Authentication" });
    await section.locator("dl.facts").getByText("None", { exact: true }).waitFor();

    // Basic, the password forgotten: said by the field, which takes the focus.
    await section.getByLabel("HTTP Basic (user name and password)").check();
    await section.getByLabel("User name", { exact: true }).fill("acme");
    await section.getByRole("button", { name: "Save authentication" }).click();
    await page
      .locator("#auth-password-error")
      .getByText(/^Enter the password\./)
      .waitFor();
    await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe("auth-password");
    expect(await page.getByLabel("Password", { exact: true }).getAttribute("aria-invalid")).toBe("true");
    await section.scrollIntoViewIfNeeded();
    await shot(page, "20-auth-problem", false);

    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await section.getByRole("button", { name: "Save authentication" }).click();
    await section.getByText("Authentication saved").waitFor();
    expect(await page.getByLabel("Password", { exact: true }).inputValue()).toBe("");
    await section.getByText("A password is set. We never show it").waitFor();
    const facts = section.locator("dl.facts");
    expect(await facts.textContent()).toMatch(/Sign-in\s*HTTP Basic[\s\S]*User name\s*acme[\s\S]*Password\s*Set/);
    const read = await stack.call("GET", `/v1/subscriptions/${id}`);
    expect(read.body.auth).toEqual({ type: "basic", username: "acme" });
    await expectNoSecrets(await page.content());
    await section.scrollIntoViewIfNeeded();
    await shot(page, "21-auth-basic", false);

    // The next webhook signs in with it, and its attempt shows the header's scheme alone.
    await page.getByRole("button", { name: "Send test event" }).click();
    await page.getByRole("link", { name: "Follow its delivery" }).click();
    const attempt = page.getByRole("article", { name: "Attempt 1" });
    await attempt.getByText("HTTP 200").waitFor();
    const received = stack.receiver.received.find((webhook) => webhook.path === "/signed-in");
    expect(received!.headers.authorization).toBe(`Basic ${Buffer.from(`acme:${PASSWORD}`).toString("base64")}`);
    expect((await headersShown(attempt)).at(-1)).toEqual(["authorization", "Basic …"]);
    await expectNoSecrets(await page.content());
    expect(await page.content()).not.toContain(Buffer.from(`acme:${PASSWORD}`).toString("base64"));

    // OAuth2: a bad token URL by its field, then saved.
    await page.goto(`${stack.baseUrl}/portal#/endpoints/${id}`);
    await section.getByLabel("OAuth 2.0 client credentials (a token your token endpoint issues)").check();
    await page.getByLabel("Token URL", { exact: true }).fill("auth.example.com/token");
    await page.getByLabel("Client ID", { exact: true }).fill("acme-client");
    await page.getByLabel("Client secret", { exact: true }).fill(CLIENT_SECRET);
    await section.getByRole("button", { name: "Save authentication" }).click();
    await page
      .locator("#auth-token-url-error")
      .getByText(/^Enter the full address of your token endpoint/)
      .waitFor();
    await page.getByLabel("Token URL", { exact: true }).fill("https://auth.example.com/oauth/token");
    await page.getByLabel("Scope (optional)").fill("webhooks:write");
    await section.getByRole("button", { name: "Save authentication" }).click();
    await section.getByText("Authentication saved").waitFor();
    expect(await facts.textContent()).toMatch(
      /OAuth 2\.0 client credentials[\s\S]*Token URL\s*https:\/\/auth\.example\.com\/oauth\/token[\s\S]*Client ID\s*acme-client[\s\S]*Client secret\s*Set[\s\S]*Scope\s*webhooks:write[\s\S]*Audience\s*None/,
    );
    expect(await page.getByLabel("Client secret", { exact: true }).inputValue()).toBe("");
    expect((await stack.call("GET", `/v1/subscriptions/${id}`)).body.auth).toEqual({
      type: "oauth2_client_credentials",
      token_url: "https://auth.example.com/oauth/token",
      client_id: "acme-client",
      scope: "webhooks:write",
      audience: null,
    });
    await expectNoSecrets(await page.content());
    await section.scrollIntoViewIfNeeded();
    await shot(page, "22-auth-oauth2", false);
    expect(await accessibilityProblems(page, "endpoint with OAuth2")).toEqual([]);

    // An Authorization header among the extra headers is refused beside it, in words.
    await page.getByLabel("Extra HTTP headers").fill("Authorization: Bearer mine");
    await page.getByRole("button", { name: "Save settings" }).click();
    await page
      .locator("#edit-headers-error")
      .getByText(/^The endpoint's authentication sends its own Authorization header/)
      .waitFor();
    await page.getByLabel("Extra HTTP headers").fill("");

    await section.getByLabel("None", { exact: true }).check();
    await section.getByRole("button", { name: "Save authentication" }).click();
    await section.getByText("Authentication removed").waitFor();
    expect((await stack.call("GET", `/v1/subscriptions/${id}`)).body.auth).toBeNull();
    expectSelfContained(session);
  });

  it("adds a client certificate, shows its fingerprint and expiry, replaces and removes it; never the key", async () => {
    const id = await createEndpoint("https://example.com/mtls", ["*"]);
    const session = await openBrowser();
    const { page } = session;
    await page.goto(await portalLink());
    await page.goto(`${stack.baseUrl}/portal#/endpoints/${id}`);
    const section = page.getByRole("region", { name: "Client certificate" });
    await section.getByText("No client certificate.").waitFor();

    await section.getByRole("button", { name: "Add a certificate" }).click();
    await page.getByLabel("Certificate (PEM)").fill(certificate.certificate);
    await page.getByLabel("Private key (PEM)").fill(otherCertificate.privateKey);
    await section.getByRole("button", { name: "Save certificate" }).click();
    await page
      .locator("#certificate-key-error")
      .getByText(/^This private key does not belong/)
      .waitFor();
    await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe("certificate-key");
    await section.scrollIntoViewIfNeeded();
    await shot(page, "23-certificate-problem", false);

    await page.getByLabel("Private key (PEM)").fill(certificate.privateKey);
    await section.getByRole("button", { name: "Save certificate" }).click();
    await section.getByText("Certificate saved").waitFor();
    const saved = (await stack.call("GET", `/v1/subscriptions/${id}`)).body.client_certificate;
    expect(saved.fingerprint_sha256).toMatch(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
    const facts = section.locator("dl.facts");
    expect(await facts.textContent()).toContain(saved.fingerprint_sha256);
    expect(await section.locator(`time[datetime="${saved.not_after}"]`).count()).toBe(1);
    // The test CA's certificates last 30 days at most: the page says it expires soon.
    await section.getByText("Expires soon").waitFor();
    expect(await page.getByLabel("Private key (PEM)").count()).toBe(0);
    await expectNoSecrets(await page.content());
    await section.scrollIntoViewIfNeeded();
    await shot(page, "24-certificate-set", false);

    await section.getByRole("button", { name: "Replace certificate" }).click();
    await page.getByLabel("Certificate (PEM)").fill(otherCertificate.certificate);
    await page.getByLabel("Private key (PEM)").fill(otherCertificate.privateKey);
    await section.getByRole("button", { name: "Save certificate" }).click();
    await section.getByText("Certificate saved").waitFor();
    const replaced = (await stack.call("GET", `/v1/subscriptions/${id}`)).body.client_certificate;
    expect(replaced.fingerprint_sha256).not.toBe(saved.fingerprint_sha256);
    expect(await facts.textContent()).toContain(replaced.fingerprint_sha256);
    expect(await page.content()).not.toContain(otherCertificate.privateKey.split("\n")[1]!);

    await section.getByRole("button", { name: "Remove certificate" }).click();
    await section.getByRole("button", { name: "Yes, remove it" }).click();
    await section.getByText("Certificate removed").waitFor();
    await section.getByText("No client certificate.").waitFor();
    expect((await stack.call("GET", `/v1/subscriptions/${id}`)).body.client_certificate).toBeNull();
    expectSelfContained(session);
  });
});

describe("signature schemes in the page", () => {
  it("creates an ed25519 endpoint: its public key instead of a secret, copyable, and a new one on rotation", async () => {
    const session = await openBrowser();
    const { page, context } = session;
    await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: stack.baseUrl });
    await page.goto(await portalLink());
    await page.getByRole("link", { name: "Add endpoint" }).click();
    await page.getByLabel("Endpoint URL").fill("https://example.com/ed25519");
    await page.getByLabel("Ed25519, with a public key (v1a)").check();
    await shot(page, "25-new-endpoint-scheme");
    await page.getByRole("button", { name: "Create endpoint" }).click();

    const publicKey = await page.getByRole("textbox", { name: "Public key" }).inputValue();
    expect(publicKey).toMatch(/^whpk_[A-Za-z0-9+/]{43}=$/);
    expect(await page.getByRole("textbox", { name: "Signing secret" }).count()).toBe(0);
    await shot(page, "26-ed25519-created");
    await page.getByRole("link", { name: "Go to the endpoint" }).click();

    const signing = page.getByRole("region", { name: "Signing key" });
    await signing.getByText("Ed25519, with a public key (v1a)").waitFor();
    expect(await signing.getByRole("textbox", { name: "Public key" }).inputValue()).toBe(publicKey);
    await signing.getByRole("button", { name: "Copy" }).click();
    await signing.getByText("Copied to the clipboard.").waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(publicKey);
    const { body: list } = await stack.call("GET", "/v1/subscriptions?limit=100");
    const id = (list.data as { id: string; public_key: string }[]).find((s) => s.public_key === publicKey)!.id;

    await signing.getByLabel("Keep the old key valid for").selectOption("1h");
    await signing.getByRole("button", { name: "Rotate key" }).click();
    await signing.getByText("New key pair made").waitFor();
    const rotated = (await stack.call("GET", `/v1/subscriptions/${id}`)).body.public_key;
    expect(rotated).not.toBe(publicKey);
    await expect.poll(() => signing.getByRole("textbox", { name: "Public key" }).inputValue()).toBe(rotated);
    await signing.scrollIntoViewIfNeeded();
    await shot(page, "27-ed25519-rotated", false);
    expect(await accessibilityProblems(page, "ed25519 endpoint")).toEqual([]);
    expectSelfContained(session);
  });

  it("shows an hmac-sha256 endpoint's scheme where its secret is rotated", async () => {
    const id = await createEndpoint("https://example.com/hmac", ["*"]);
    const session = await openBrowser();
    const { page } = session;
    await page.goto(await portalLink());
    await page.goto(`${stack.baseUrl}/portal#/endpoints/${id}`);
    const signing = page.getByRole("region", { name: "Signing secret" });
    await signing.getByText("HMAC-SHA256, with a shared secret (v1)").waitFor();
    expect(await signing.getByRole("textbox", { name: "Public key" }).count()).toBe(0);
  });
});
