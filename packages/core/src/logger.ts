import { type DestinationStream, type Logger, pino } from "pino";

export type { Logger };

export interface LoggerOptions {
  level: string;
  name: string;
  /** Where the lines go: stdout unless given (a test that reads them gives its own stream). */
  destination?: DestinationStream;
}

/**
 * JSON logs (pino) for both apps. Secrets and API keys must never reach a log: code never logs
 * them, and these paths are redacted as a second line of defence.
 */
export function createLogger(options: LoggerOptions): Logger {
  const settings = {
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
  };
  return options.destination ? pino(settings, options.destination) : pino(settings);
}
