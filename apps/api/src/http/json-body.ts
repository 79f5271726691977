import type { HttpBindings } from "@hono/node-server";
import type { MiddlewareHandler } from "hono";
import { ApiError } from "./api-error.ts";
import type { ApiEnv } from "./types.ts";

const jsonMediaType = /^application\/([\w.-]+\+)?json$/i;

/**
 * Request bodies (contract §2): over the limit is a 413, counted on the bytes received so that a
 * chunked body cannot slip past; a body that is not JSON is a 415; malformed JSON, or JSON that
 * is not an object, is a 400. An empty body is an empty object, so `PUT` with no body is a no-op.
 * Routes then validate the parsed object against their schemas.
 *
 * The body is read straight from Node's request stream: going through the web Request that
 * @hono/node-server would otherwise build costs a noticeable share of a publish's CPU.
 */
export function jsonBody(maxBytes: number): MiddlewareHandler<ApiEnv> {
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
      for await (const chunk of incoming as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > maxBytes) throw tooLarge();
        chunks.push(chunk);
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
    cache.text = Promise.resolve(text);
    return next();
  };
}
