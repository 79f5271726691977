import type { HttpBindings } from "@hono/node-server";
import type { MiddlewareHandler } from "hono";
import { matchedRoutes } from "hono/route";
import { ApiError } from "./api-error.ts";
import { findInexactNumber } from "./exact-numbers.ts";
import type { ApiEnv } from "./types.ts";

const jsonMediaType = /^application\/([\w.-]+\+)?json$/i;

/**
 * Request bodies (contract §2): over the limit is a 413, counted on the bytes received so that a
 * chunked body cannot slip past; a body that is not JSON is a 415; malformed JSON, or JSON that
 * is not an object, is a 400, and so is a number that parsing would change (see exact-numbers.ts).
 * An empty body is an empty object for POST (its routes' bodies are optional or name their missing
 * fields); PUT, whose body the OpenAPI document marks required, needs one. A client that goes
 * away mid-body is answered (and counted) 499, nginx's "client closed request": it is not our error.
 * Routes then validate the parsed object against their schemas.
 *
 * The body is read straight from Node's request stream: going through the web Request that
 * @hono/node-server would otherwise build costs a noticeable share of a publish's CPU.
 */
export function jsonBody(maxBytes: number): MiddlewareHandler<ApiEnv> {
  const clientClosed = () =>
    new ApiError(499, "invalid_request_error", "client_closed_request", "The client closed the connection before the whole request body arrived");
  const tooLarge = () => new ApiError(413, "invalid_request_error", "body_too_large", `The request body must not exceed ${maxBytes} bytes`);

  return async (c, next) => {
    if (c.req.method !== "POST" && c.req.method !== "PUT" && c.req.method !== "PATCH") return next();
    const declared = c.req.header("content-length");
    if (declared !== undefined && Number(declared) > maxBytes) throw tooLarge();

    const incoming = (c.env as Partial<HttpBindings> | undefined)?.incoming;
    let text: string;
    if (incoming) {
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
        if (incoming.destroyed || (error as { code?: unknown }).code === "ECONNRESET") throw clientClosed();
        throw error;
      }
      text = Buffer.concat(chunks).toString("utf8");
    } else {
      text = await c.req.text();
      if (Buffer.byteLength(text) > maxBytes) throw tooLarge();
    }

    const mediaType = (c.req.header("content-type") ?? "").split(";")[0]?.trim() ?? "";
    // The route's JSON validator parses the cached text; an empty JSON body means {}.
    // (Hono caches bodies as promises, although its types say otherwise.)
    const cache = c.req.bodyCache as Record<string, unknown>;
    if (text.trim().length === 0) {
      // Only where a route will take the request: elsewhere the answer is a 404 or 405.
      if (c.req.method !== "POST" && matchedRoutes(c).some((route) => route.method === c.req.method)) {
        throw new ApiError(400, "invalid_request_error", "body_missing", "The request body is required: a JSON object with the fields to change");
      }
      cache.text = Promise.resolve(jsonMediaType.test(mediaType) ? "{}" : "");
      return next();
    }
    if (!jsonMediaType.test(mediaType)) {
      throw new ApiError(415, "invalid_request_error", "unsupported_media_type", "The request body must be JSON, sent with Content-Type: application/json");
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
    if (inexact) throw new ApiError(400, "invalid_request_error", "parameter_invalid", `${inexact.path} ${inexact.reason}`, inexact.path);
    cache.text = Promise.resolve(text);
    return next();
  };
}
