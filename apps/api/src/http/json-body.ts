import type { HttpBindings } from "@hono/node-server";
import type { Context, MiddlewareHandler } from "hono";
import { matchedRoutes } from "hono/route";
import { ApiError } from "./api-error.ts";
import { contentEncodingProblem, contentTypeProblem } from "./content-type.ts";
import { findInexactNumber } from "./exact-numbers.ts";
import type { ApiEnv } from "./types.ts";

/** JSON's whitespace: a body of nothing else is no body. */
const isBlank = (bytes: Uint8Array) =>
  bytes.every((byte) => byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09);

/**
 * Request bodies (docs/api.md#requests), on the routes that take the request's method only:
 * elsewhere the answer is a 404 or a 405 (unmatched-route.ts), whatever the body. Over the limit is
 * a 413, counted on the bytes received so that a chunked body cannot slip past; a body that is not
 * JSON in UTF-8, or is compressed, is a 415 (content-type.ts); bytes that are not UTF-8, malformed
 * JSON, or JSON that is not an object, are a 400, and so is a number that parsing would change (see
 * exact-numbers.ts). Bytes that are not UTF-8 are refused, not replaced with U+FFFD: the replaced
 * text would be stored and delivered, and two different bodies would pass as the same request for
 * an Idempotency-Key.
 *
 * An empty body is no body, whatever its Content-Type (fetch() sends `text/plain;charset=UTF-8`
 * with `body: ""`): for POST the route then validates it as `{}` (its routes' bodies are optional
 * or name their missing fields); PUT, whose body the OpenAPI document marks required, needs one.
 * A client that goes away mid-body is answered (and counted) 499, nginx's "client closed
 * request": it is not our error. Routes then validate the parsed object against their schemas.
 *
 * The body is read straight from Node's request stream: going through the web Request that
 * @hono/node-server would otherwise build costs a noticeable share of a publish's CPU.
 */
export function jsonBody(maxBytes: number): MiddlewareHandler<ApiEnv> {
  const tooLarge = () =>
    new ApiError(413, "invalid_request_error", "body_too_large", `The request body must not exceed ${maxBytes} bytes`);
  // ignoreBOM keeps a byte order mark in the text, which JSON.parse then refuses, as it always did.
  const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

  return async (c, next) => {
    if (c.req.method !== "POST" && c.req.method !== "PUT" && c.req.method !== "PATCH") return next();
    // No route takes it: the 404 or 405 comes first, whatever the body says.
    if (!matchedRoutes(c).some((route) => route.method === c.req.method)) return next();
    const declared = c.req.header("content-length");
    if (declared !== undefined && Number(declared) > maxBytes) throw tooLarge();
    const bytes = await readBody(c, maxBytes, tooLarge);

    if (isBlank(bytes)) {
      if (c.req.method !== "POST") {
        throw new ApiError(
          400,
          "invalid_request_error",
          "body_missing",
          "The request body is required: a JSON object with the fields to change",
        );
      }
      // Without a type, the route's validator reads the request as one without a body, instead
      // of refusing a text/plain one with a 415.
      c.req.raw.headers.delete("content-type");
      return next();
    }
    const refused =
      contentEncodingProblem(c.req.header("content-encoding")) ?? contentTypeProblem(c.req.header("content-type"));
    if (refused) throw refused;
    let text: string;
    try {
      text = utf8.decode(bytes);
    } catch {
      throw new ApiError(400, "invalid_request_error", "invalid_json", "The request body is not valid UTF-8");
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new ApiError(400, "invalid_request_error", "invalid_json", "The request body is not valid JSON");
    }
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
      throw new ApiError(400, "invalid_request_error", "invalid_json", "The request body must be a JSON object");
    }
    const inexact = findInexactNumber(text);
    if (inexact)
      throw new ApiError(
        400,
        "invalid_request_error",
        "parameter_invalid",
        `${inexact.path} ${inexact.reason}`,
        inexact.path,
      );
    // The route's JSON validator parses the cached text. (Hono caches bodies as promises,
    // although its types say otherwise.)
    (c.req.bodyCache as Record<string, unknown>).text = Promise.resolve(text);
    return next();
  };
}

/** The body's bytes, refused with `tooLarge()` as soon as they exceed `maxBytes`. */
async function readBody(c: Context<ApiEnv>, maxBytes: number, tooLarge: () => ApiError): Promise<Uint8Array> {
  const incoming = (c.env as Partial<HttpBindings> | undefined)?.incoming;
  if (!incoming) {
    // Not behind @hono/node-server (app.request() in a test): the web Request has the body.
    const bytes = new Uint8Array(await c.req.arrayBuffer());
    if (bytes.length > maxBytes) throw tooLarge();
    return bytes;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of incoming as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > maxBytes) throw tooLarge();
      chunks.push(chunk);
    }
  } catch (error) {
    if (error instanceof ApiError) throw error;
    if (incoming.destroyed || (error as { code?: unknown }).code === "ECONNRESET") {
      throw new ApiError(
        499,
        "invalid_request_error",
        "client_closed_request",
        "The client closed the connection before the whole request body arrived",
      );
    }
    throw error;
  }
  return Buffer.concat(chunks);
}
