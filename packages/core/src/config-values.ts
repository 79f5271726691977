import { z } from "zod";
import { parseDuration } from "./durations.ts";

/**
 * How the text of an environment variable becomes a value of the configuration (config.ts), and
 * the message it gets when it cannot: a value type per kind of variable.
 */

/** Node's timers cannot wait longer than 2^31-1 ms (about 24.8 days). */
const MAX_TIMER_MS = 2_147_483_647;

export const durationUpTo = (maxMs: number, maxText: string) =>
  z.string().transform((text, ctx) => {
    const ms = parseDuration(text);
    if (ms === undefined || ms > maxMs) {
      ctx.addIssue({ code: "custom", message: `must be a duration such as 500ms, 15s, 5m or 2h, at most ${maxText}` });
      return z.NEVER;
    }
    return ms;
  });
/** Durations that feed a timer. */
export const duration = durationUpTo(MAX_TIMER_MS, "24d");

export const boolean = z
  .enum(["true", "false", "1", "0"], { error: "must be true or false" })
  .transform((v) => v === "true" || v === "1");

/** One of a few words, said as plainly as the other messages. */
export const oneOf = <const T extends readonly [string, ...string[]]>(values: T) =>
  z.enum(values, { error: `must be one of ${values.join(", ")}` });

export const integer = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, `must be an integer between ${min} and ${max}`)
    .transform(Number)
    .pipe(
      z
        .number()
        .int()
        .min(min, `must be an integer between ${min} and ${max}`)
        .max(max, `must be an integer between ${min} and ${max}`),
    );

export const url = (protocols: string[]) =>
  z.string().refine(
    (text) => {
      try {
        return protocols.includes(new URL(text).protocol);
      } catch {
        return false;
      }
    },
    `must be a URL starting with ${protocols.map((p) => `${p}//`).join(" or ")}`,
  );

/** The OTLP encodings the exporters speak (gRPC is not among them: docs/operations.md#tracing). */
export const otlpProtocol = z.enum(["http/protobuf", "http/json"], { error: "must be http/protobuf or http/json" });

/** `host:port`, `[ipv6]:port`; undefined when malformed. */
export function parseClusterNode(text: string): { host: string; port: number } | undefined {
  const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/.exec(text);
  const port = Number(match?.[3]);
  const host = match?.[1] ?? match?.[2];
  if (!host || !Number.isInteger(port) || port < 1 || port > 65535) return undefined;
  return { host, port };
}

/**
 * The portal's Content-Security-Policy lets images come from its own origin or data: URLs, and
 * nothing else (docs/portal.md#security): a path on this server (not `//host`, which is another
 * origin, nor a backslash, which browsers read as a slash), or a data: URL of an image.
 */
export function isPortalLogoUrl(text: string): boolean {
  if (/^data:image\/(png|jpeg|gif|webp|avif|svg\+xml)[;,]/i.test(text)) return !/[\s"<>]/.test(text);
  if (!text.startsWith("/") || text.startsWith("//") || /[\\\s\p{Cc}"<>]/u.test(text)) return false;
  try {
    return new URL(text, "https://portal.invalid").origin === "https://portal.invalid";
  } catch {
    return false;
  }
}

/**
 * A retention period (docs/api.md#retention): a duration more than 0 and at most ten years (compared
 * with created_at, never handed to a timer), or `off` (undefined). 0 is refused rather than read as
 * "delete at once".
 */
export function parseRetention(text: string, ctx: z.RefinementCtx): number | undefined {
  if (text === "off") return undefined;
  const ms = parseDuration(text);
  if (ms === undefined || ms === 0 || ms > 3660 * 24 * 3_600_000) {
    ctx.addIssue({
      code: "custom",
      message: "must be a duration such as 12h, 30d or 365d, more than 0 and at most 3660d, or off",
    });
    return z.NEVER;
  }
  return ms;
}
