import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../src/config.ts";
import { configError } from "./config-error.ts";

const validKey = randomBytes(32).toString("base64");

describe("loadConfig: the portal's branding", () => {
  it("names the portal Webhooks, with no logo and no way back, by default", () => {
    expect(loadConfig({}).portal).toEqual({ name: "Webhooks", logoUrl: undefined, back: undefined });
  });

  it("takes a name, a logo from this origin or a data: URL, and a return URL", () => {
    const logo = "data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciLz4=";
    expect(
      loadConfig({ PORTAL_NAME: "Acme", PORTAL_LOGO_URL: logo, PORTAL_RETURN_URL: "https://app.acme.test/settings" })
        .portal,
    ).toEqual({ name: "Acme", logoUrl: logo, back: { url: "https://app.acme.test/settings", label: "Acme" } });
    // Without a name, the way back names the product by its host, not "Webhooks".
    expect(loadConfig({ PORTAL_RETURN_URL: "https://app.acme.test/settings" }).portal.back).toEqual({
      url: "https://app.acme.test/settings",
      label: "app.acme.test",
    });
    for (const path of ["/brand/logo.svg", "/portal-logo.png?v=2"])
      expect(loadConfig({ PORTAL_LOGO_URL: path }).portal.logoUrl).toBe(path);
  });

  it.each([
    "https://cdn.example.com/logo.svg",
    "//cdn.example.com/logo.svg",
    "/\\cdn.example.com/logo.svg",
    "logo.svg",
    "javascript:alert(1)",
    "data:text/html;base64,PHNjcmlwdD4=",
    "/logo.svg onerror=alert(1)",
  ])("refuses PORTAL_LOGO_URL=%j in one line that says what it takes", (value) => {
    const error = configError({ PORTAL_LOGO_URL: value });
    expect(error.message).toBe(
      "Invalid configuration: PORTAL_LOGO_URL must be a path on this server, such as /brand/logo.svg, or a data:image/... URL: the portal loads nothing from another origin",
    );
    expect(error.message).not.toContain("\n");
  });

  it("refuses a logo too large to inline in every page, a name with control characters, a return URL that is not http(s)", () => {
    expect(configError({ PORTAL_LOGO_URL: `data:image/png;base64,${"A".repeat(70_000)}` }).message).toBe(
      "Invalid configuration: PORTAL_LOGO_URL must be at most 64 KiB",
    );
    expect(configError({ PORTAL_NAME: "Acme\u0007" }).message).toMatch(
      /^Invalid configuration: PORTAL_NAME must not contain control characters/,
    );
    expect(configError({ PORTAL_NAME: "x".repeat(101) }).message).toMatch(/PORTAL_NAME must be at most 100 characters/);
    expect(configError({ PORTAL_RETURN_URL: "javascript:history.back()" }).message).toBe(
      "Invalid configuration: PORTAL_RETURN_URL must be a URL starting with https:// or http://",
    );
  });

  it("wants an https:// return URL in production", () => {
    const production = { NODE_ENV: "production", SECRET_ENCRYPTION_KEY: validKey };
    expect(configError({ ...production, PORTAL_RETURN_URL: "http://app.acme.test/" }).message).toBe(
      "Invalid configuration: PORTAL_RETURN_URL must start with https:// when NODE_ENV=production",
    );
    expect(loadConfig({ ...production, PORTAL_RETURN_URL: "https://app.acme.test/" }).portal.back?.url).toBe(
      "https://app.acme.test/",
    );
  });
});
