import { type DestinationStream, type Logger, pino } from "pino";
import pretty from "pino-pretty";
import type { Config } from "./config.ts";

export type { Logger };

/** JSON lines, for machines; or pretty, coloured lines for a person reading a terminal. */
export type LogFormat = "json" | "pretty";

export interface LoggerOptions {
  level: string;
  name: string;
  /** JSON unless given. */
  format?: LogFormat;
  /** Where the lines go: stdout unless given (a test that reads them gives its own stream). */
  destination?: DestinationStream;
}

/**
 * The format of the apps' logs: LOG_FORMAT when set; otherwise pretty in development on a
 * terminal, JSON everywhere else (production, tests, a pipe to a log collector). `npm start` runs
 * the apps behind concurrently, whose pipes are not terminals: it says that its own output is one
 * by setting FORCE_COLOR for them.
 */
export function logFormatFor(
  config: Pick<Config, "env" | "logFormat">,
  stdout: { isTTY?: boolean } = process.stdout,
  forceColor: string | undefined = process.env.FORCE_COLOR,
): LogFormat {
  if (config.logFormat !== undefined) return config.logFormat;
  if (config.env !== "development") return "json";
  const colourTerminal = forceColor !== undefined && forceColor !== "0" && forceColor !== "false";
  return stdout.isTTY === true || colourTerminal ? "pretty" : "json";
}

/**
 * Logs (pino) for both apps. Secrets and API keys must never reach a log: code never logs them,
 * and these paths are redacted as a second line of defence, in either format.
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
        // Endpoint credentials (docs/api.md#endpoint-authentication), in the API's spelling and in ours.
        "client_secret",
        "*.client_secret",
        "*.*.client_secret",
        "private_key",
        "*.private_key",
        "*.*.private_key",
        "*.*.password",
        "privateKey",
        "*.privateKey",
        "proxyUrl",
        "*.proxyUrl",
        "egressProxyUrl",
        "*.egressProxyUrl",
      ],
      censor: "[redacted]",
    },
  };
  if (options.format === "pretty") {
    const lines = pretty({
      destination: options.destination ?? 1,
      sync: true,
      colorize: options.destination === undefined,
      ignore: "pid,hostname",
      translateTime: "SYS:HH:MM:ss.l",
    });
    return pino(settings, lines);
  }
  return options.destination ? pino(settings, options.destination) : pino(settings);
}
