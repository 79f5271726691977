import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../src/config.ts";
import { configError } from "./config-error.ts";

const validKey = randomBytes(32).toString("base64");

describe("loadConfig in production", () => {
  it("requires SECRET_ENCRYPTION_KEY", () => {
    const error = configError({ NODE_ENV: "production" });
    expect(error.message).toContain("SECRET_ENCRYPTION_KEY");
    expect(configError({ NODE_ENV: "production", SECRET_ENCRYPTION_KEY: "" }).message).toContain(
      "SECRET_ENCRYPTION_KEY",
    );
  });

  it("uses the given key and refuses plain HTTP and private destinations by default", () => {
    const config = loadConfig({ NODE_ENV: "production", SECRET_ENCRYPTION_KEY: validKey });
    expect(config.env).toBe("production");
    expect(config.secretEncryptionKey.equals(Buffer.from(validKey, "base64"))).toBe(true);
    expect(config.destinationPolicy).toEqual({ allowHttp: false, allowPrivateNetworks: false });
  });

  it("lets explicit values override the production defaults", () => {
    const base = { NODE_ENV: "production", SECRET_ENCRYPTION_KEY: validKey };
    expect(loadConfig({ ...base, ALLOW_HTTP_URLS: "true" }).destinationPolicy).toEqual({
      allowHttp: true,
      allowPrivateNetworks: false,
    });
    expect(loadConfig({ ...base, ALLOW_PRIVATE_DESTINATIONS: "1" }).destinationPolicy).toEqual({
      allowHttp: false,
      allowPrivateNetworks: true,
    });
  });

  it("lets explicit values override the development defaults", () => {
    expect(loadConfig({ ALLOW_HTTP_URLS: "false" }).destinationPolicy).toEqual({
      allowHttp: false,
      allowPrivateNetworks: true,
    });
    expect(loadConfig({ ALLOW_PRIVATE_DESTINATIONS: "false" }).destinationPolicy).toEqual({
      allowHttp: true,
      allowPrivateNetworks: false,
    });
  });

  it("never uses the development key when a key is given", () => {
    const development = loadConfig({}).secretEncryptionKey;
    expect(loadConfig({ SECRET_ENCRYPTION_KEY: validKey }).secretEncryptionKey.equals(development)).toBe(false);
  });
});

describe("loadConfig admin credentials", () => {
  it("reads them together", () => {
    expect(loadConfig({ ADMIN_USERNAME: "ops", ADMIN_PASSWORD: "pw" }).admin).toEqual({
      username: "ops",
      password: "pw",
    });
  });

  it("refuses a username without a password and the reverse", () => {
    expect(configError({ ADMIN_USERNAME: "ops" }).message).toMatch(/ADMIN_USERNAME and ADMIN_PASSWORD/);
    expect(configError({ ADMIN_PASSWORD: "pw" }).message).toMatch(/ADMIN_USERNAME and ADMIN_PASSWORD/);
    expect(configError({ ADMIN_USERNAME: "ops", ADMIN_PASSWORD: "" }).message).toMatch(
      /ADMIN_USERNAME and ADMIN_PASSWORD/,
    );
  });
});

describe("loadConfig empty variables", () => {
  it("treats an empty string as unset", () => {
    const config = loadConfig({
      PORT: "",
      DATABASE_URL: "",
      REDIS_URL: "",
      LOG_LEVEL: "",
      RETRY_SCHEDULE: "",
      DELIVERY_TIMEOUT: "",
      ALLOW_HTTP_URLS: "",
      SECRET_ENCRYPTION_KEY: "",
      ADMIN_USERNAME: "",
      ADMIN_PASSWORD: "",
      NODE_ENV: "",
    });
    expect(config).toEqual(loadConfig({}));
  });

  it("treats undefined as unset", () => {
    expect(loadConfig({ PORT: undefined, NODE_ENV: undefined })).toEqual(loadConfig({}));
  });
});

describe("loadConfig API_KEYS", () => {
  it.each([
    ["one", ["one"]],
    ["one,two", ["one", "two"]],
    [" one , two ,three ", ["one", "two", "three"]],
    ["one,,two,", ["one", "two"]],
    [" , ", []],
  ])("reads %j as %j", (text, keys) => {
    expect(loadConfig({ API_KEYS: text }).apiKeys).toEqual(keys);
  });
});

describe("loadConfig METRICS_TOKEN", () => {
  it("leaves /metrics open by default and reads a token when given", () => {
    expect(loadConfig({}).metricsToken).toBeUndefined();
    expect(loadConfig({ METRICS_TOKEN: "mt_0123456789abcdef" }).metricsToken).toBe("mt_0123456789abcdef");
  });

  it("refuses a token with spaces, without echoing it", () => {
    const error = configError({ METRICS_TOKEN: "two words" });
    expect(error.message).toContain("METRICS_TOKEN must be a token without spaces");
    expect(error.message).not.toContain("two words");
  });
});
