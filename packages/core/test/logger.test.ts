import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

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
