import { pino, type Logger } from "pino";

export type { Logger };

/**
 * JSON logs (pino) for both apps. Secrets and API keys must never reach a log: code never logs
 * them, and these paths are redacted as a second line of defence.
 */
export function createLogger(options: { level: string; name: string }): Logger {
  return pino({
    name: options.name,
    level: options.level,
    redact: {
      paths: [
        "secret",
        "*.secret",
        "signingSecret",
        "*.signingSecret",
        "apiKey",
        "*.apiKey",
        "apiKeys",
        "*.apiKeys",
        "secretEncryptionKey",
        "*.secretEncryptionKey",
        "authorization",
        "*.authorization",
        "headers.authorization",
        "headers.Authorization",
        "*.headers.authorization",
        "*.headers.Authorization",
        "password",
        "*.password",
      ],
      censor: "[redacted]",
    },
  });
}
