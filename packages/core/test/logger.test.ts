import { execFileSync } from "node:child_process";
import { PassThrough } from "node:stream";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { createLogger, logFormatFor } from "../src/logger.ts";

const loggerModule = fileURLToPath(new URL("../src/logger.ts", import.meta.url));

/**
 * pino writes straight to file descriptor 1, so each scenario runs in a child process and the
 * test reads the JSON lines it printed.
 */
function logLines(level: string, statements: string): Record<string, unknown>[] {
  const script = `import { createLogger } from ${JSON.stringify(loggerModule)};
const logger = createLogger({ level: ${JSON.stringify(level)}, name: "test-app" });
${statements}`;
  const output = execFileSync(process.execPath, ["--import", "tsx", "--input-type=module", "--eval", script], {
    cwd: fileURLToPath(new URL("..", import.meta.url)),
    encoding: "utf8",
  });
  return output
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe("createLogger", () => {
  it("writes JSON lines with the name, and hides secrets at the redacted paths", () => {
    const lines = logLines(
      "info",
      `logger.info({
        secret: "whsec_TOP",
        subscription: { id: "sub_1", secret: "whsec_NESTED" },
        apiKey: "key_TOP",
        caller: { apiKey: "key_NESTED" },
        authorization: "Bearer TOP",
        headers: { authorization: "Bearer HEADERS", "content-type": "application/json" },
        req: { headers: { authorization: "Bearer REQ" } },
        password: "pw_TOP",
        admin: { username: "ops", password: "pw_NESTED" },
        config: { apiKeys: ["static_KEYS"], secretEncryptionKey: "enc_KEY" },
        signingSecret: "whsec_SIGNING",
        upstream: { headers: { Authorization: "Bearer CAPITAL" } },
        body: { auth: { type: "basic", password: "pw_AUTH" }, client_certificate: { private_key: "PEM_KEY" } },
        oauth: { auth: { client_secret: "cs_AUTH" } },
        client_secret: "cs_TOP",
        identity: { privateKey: "PEM_CAMEL" },
        proxyUrl: "http://u:proxy_PW@proxy:3128",
        worker: { egressProxyUrl: "http://u:proxy_PW2@proxy:3128" },
        deliveryId: "dlv_1",
      }, "delivered");`,
    );
    expect(lines).toHaveLength(1);
    const line = lines[0];
    const text = JSON.stringify(line);
    for (const secret of [
      "whsec_TOP",
      "whsec_NESTED",
      "key_TOP",
      "key_NESTED",
      "Bearer TOP",
      "Bearer HEADERS",
      "Bearer REQ",
      "pw_TOP",
      "pw_NESTED",
      "static_KEYS",
      "enc_KEY",
      "whsec_SIGNING",
      "Bearer CAPITAL",
      "pw_AUTH",
      "PEM_KEY",
      "cs_AUTH",
      "cs_TOP",
      "PEM_CAMEL",
      "proxy_PW",
      "proxy_PW2",
    ]) {
      expect(text).not.toContain(secret);
    }
    expect(line).toMatchObject({
      name: "test-app",
      msg: "delivered",
      level: 30,
      secret: "[redacted]",
      subscription: { id: "sub_1", secret: "[redacted]" },
      apiKey: "[redacted]",
      caller: { apiKey: "[redacted]" },
      authorization: "[redacted]",
      headers: { authorization: "[redacted]", "content-type": "application/json" },
      req: { headers: { authorization: "[redacted]" } },
      password: "[redacted]",
      admin: { username: "ops", password: "[redacted]" },
      deliveryId: "dlv_1",
    });
  });

  it("drops lines below the configured level", () => {
    const lines = logLines(
      "warn",
      `logger.info("info line"); logger.debug("debug line"); logger.warn("warn line"); logger.error("error line");`,
    );
    expect(lines.map((line) => line.msg)).toEqual(["warn line", "error line"]);
  });

  it("writes nothing at level silent", () => {
    expect(logLines("silent", `logger.fatal("fatal line"); logger.error("error line");`)).toEqual([]);
  });
});

describe("logFormatFor", () => {
  const terminal = { isTTY: true };
  const pipe = { isTTY: false };
  it.each([
    // [mode, LOG_FORMAT, stdout, FORCE_COLOR, format]
    ["development", undefined, terminal, undefined, "pretty"],
    ["development", undefined, pipe, undefined, "json"],
    // npm start: concurrently's pipe, in a terminal that takes colours.
    ["development", undefined, pipe, "3", "pretty"],
    ["development", undefined, pipe, "0", "json"],
    ["production", undefined, terminal, "3", "json"],
    ["test", undefined, terminal, undefined, "json"],
    ["development", "json", terminal, undefined, "json"],
    ["production", "pretty", pipe, undefined, "pretty"],
  ] as const)("%s, LOG_FORMAT=%s, %o, FORCE_COLOR=%s: %s", (env, logFormat, stdout, forceColor, format) => {
    expect(logFormatFor({ env, logFormat }, stdout, forceColor)).toBe(format);
  });
});

describe("createLogger's pretty format", () => {
  it("writes a line a person reads, with the level, the name and the message, and still hides secrets", async () => {
    const output = new PassThrough();
    let text = "";
    output.on("data", (chunk: Buffer) => (text += chunk.toString()));
    const logger = createLogger({ level: "info", name: "test-app", format: "pretty", destination: output });
    logger.info({ deliveryId: "dlv_1", secret: "whsec_TOP", headers: { authorization: "Bearer TOP" } }, "delivered");
    logger.debug("below the level");
    await new Promise((resolve) => setImmediate(resolve));
    expect(text).toMatch(/^\[\d{2}:\d{2}:\d{2}\.\d{3}\] INFO \(test-app\): delivered\n/);
    expect(text).toContain('deliveryId: "dlv_1"');
    expect(text).not.toContain("whsec_TOP");
    expect(text).not.toContain("Bearer TOP");
    expect(text).not.toContain("below the level");
    // Not JSON, and without the process's id and host, which a person at a terminal does not need.
    expect(() => JSON.parse(text.split("\n")[0]!)).toThrow();
    expect(text).not.toMatch(/pid|hostname/);
  });
});
