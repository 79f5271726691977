import { describe, expect, it } from "vitest";
import { attemptRequestHeaders, elideCredential, isCredentialHeader } from "../src/request-headers.ts";

describe("isCredentialHeader", () => {
  it.each([
    "Authorization",
    "proxy-authorization",
    "X-Api-Key",
    "x-apikey",
    "X-Auth-Token",
    "Cookie",
    "X-Client-Secret",
    "X-Password",
    "X-Session-Id",
    "X-Hub-Signature",
    "X-JWT",
    "Private-Key",
  ])("hides %s", (name) => {
    expect(isCredentialHeader(name)).toBe(true);
  });

  it.each(["X-Region", "X-Customer", "Accept-Language", "X-Request-Id", "Tenant"])("shows %s", (name) => {
    expect(isCredentialHeader(name)).toBe(false);
  });
});

describe("elideCredential", () => {
  it("keeps a scheme, and nothing of the credential", () => {
    expect(elideCredential("Bearer s3cr3t.t0ken")).toBe("Bearer …");
    expect(elideCredential("Basic dXNlcjpwYXNz")).toBe("Basic …");
    expect(elideCredential("s3cr3t")).toBe("…");
    expect(elideCredential("")).toBe("…");
    // Not a scheme: a value that merely has a space in it.
    expect(elideCredential("sk live 123")).toBe("sk …");
  });
});

describe("attemptRequestHeaders", () => {
  it("lists the headers in the order sent, the signature and credentials elided, the timestamp the start's", () => {
    const headers = attemptRequestHeaders({
      customHeaders: { Authorization: "Bearer s3cr3t", "X-Region": "eu", "X-Api-Key": "k_123" },
      eventId: "evt_01JD5V6Y7Z8X9W0V1U2T3S4R5Q",
      startedAt: new Date("2026-11-23T08:20:23.987Z"),
      signatureScheme: "hmac-sha256",
      authType: null,
    });
    expect(Object.entries(headers)).toEqual([
      ["content-type", "application/json"],
      ["user-agent", "webhook-delivery-service/1.0"],
      ["Authorization", "Bearer …"],
      ["X-Region", "eu"],
      ["X-Api-Key", "…"],
      ["webhook-id", "evt_01JD5V6Y7Z8X9W0V1U2T3S4R5Q"],
      ["webhook-timestamp", String(Math.floor(Date.parse("2026-11-23T08:20:23.987Z") / 1000))],
      ["webhook-signature", "v1,…"],
    ]);
    expect(JSON.stringify(headers)).not.toMatch(/s3cr3t|k_123/);
  });

  it("drops a stored header the worker would not send", () => {
    const headers = attemptRequestHeaders({
      customHeaders: { "Webhook-Id": "forged", Host: "elsewhere" },
      eventId: "evt_01JD5V6Y7Z8X9W0V1U2T3S4R5Q",
      startedAt: new Date(0),
      signatureScheme: "hmac-sha256",
      authType: null,
    });
    expect(headers).not.toHaveProperty("Webhook-Id");
    expect(headers).not.toHaveProperty("Host");
    expect(headers["webhook-id"]).toBe("evt_01JD5V6Y7Z8X9W0V1U2T3S4R5Q");
  });

  it("shows v1a for ed25519, and the endpoint auth's Authorization last, as its scheme alone", () => {
    const shown = (authType: "basic" | "oauth2_client_credentials" | null) =>
      attemptRequestHeaders({
        customHeaders: { "X-Region": "eu" },
        eventId: "evt_01JD5V6Y7Z8X9W0V1U2T3S4R5Q",
        startedAt: new Date(0),
        signatureScheme: "ed25519",
        authType,
      });
    expect(Object.entries(shown("basic")).slice(-2)).toEqual([
      ["webhook-signature", "v1a,…"],
      ["authorization", "Basic …"],
    ]);
    expect(shown("oauth2_client_credentials").authorization).toBe("Bearer …");
    expect(shown(null)).not.toHaveProperty("authorization");
    // A stored Authorization header (from before auth and it were refused together) is replaced, as the worker does.
    const replaced = attemptRequestHeaders({
      customHeaders: { Authorization: "Bearer mine" },
      eventId: "evt_01JD5V6Y7Z8X9W0V1U2T3S4R5Q",
      startedAt: new Date(0),
      signatureScheme: "hmac-sha256",
      authType: "basic",
    });
    expect(Object.keys(replaced).filter((name) => name.toLowerCase() === "authorization")).toEqual(["authorization"]);
    expect(replaced.authorization).toBe("Basic …");
  });
});
