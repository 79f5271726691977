import { ApiError } from "./api-error.ts";

/** What every 415 for a body that is not JSON says, whichever check refuses it (errors.ts too). */
export const NOT_JSON_MESSAGE = "The request body must be JSON, sent with Content-Type: application/json";

/** `application/json` and the `+json` types, as the routes' validator (@hono/zod-openapi) reads them. */
const jsonMediaType = /^application\/([a-z.-]+\+)?json$/i;
/**
 * One `name=value` parameter, its value a token or a quoted string: a subset of what the routes'
 * validator takes, so that a type accepted here is never refused there with a vaguer message.
 */
const mediaTypeParameter = /^\s*([A-Za-z0-9-]+)=(?:"([^";]*)"|([^";\s]+))\s*$/;

const unsupported = (message: string, headers?: Record<string, string>) =>
  new ApiError(415, "invalid_request_error", "unsupported_media_type", message, undefined, headers);

/**
 * Why a request body with this Content-Type cannot be read as JSON (a 415), or undefined when it
 * can. The body is decoded as UTF-8, the only encoding JSON may be sent in (RFC 8259 §8.1), so a
 * charset naming another one is refused rather than misread.
 */
export function contentTypeProblem(header: string | undefined): ApiError | undefined {
  const [mediaType = "", ...parameters] = (header ?? "").split(";");
  if (!jsonMediaType.test(mediaType)) return unsupported(NOT_JSON_MESSAGE);
  for (const parameter of parameters) {
    const parsed = mediaTypeParameter.exec(parameter);
    if (!parsed) {
      return unsupported(
        "The Content-Type header is malformed: send Content-Type: application/json, with any parameters as name=value (such as charset=utf-8)",
      );
    }
    const [, name = "", quoted, token] = parsed;
    const charset = (quoted ?? token ?? "").toLowerCase();
    if (name.toLowerCase() === "charset" && charset !== "utf-8" && charset !== "utf8") {
      return unsupported(
        "The request body must be UTF-8: send Content-Type: application/json with charset=utf-8, or with no charset",
      );
    }
  }
  return undefined;
}

/**
 * Why a body sent with this Content-Encoding cannot be read (a 415), or undefined when it can: we
 * do not decompress, so only `identity` (the same as none) is taken. The 415 says so in
 * Accept-Encoding, as RFC 7694 suggests.
 */
export function contentEncodingProblem(header: string | undefined): ApiError | undefined {
  if (header === undefined) return undefined;
  const codings = header.split(",").map((coding) => coding.trim().toLowerCase());
  if (codings.every((coding) => coding === "identity" || coding === "")) return undefined;
  return unsupported(
    "Content-Encoding is not supported: send the request body uncompressed, with no Content-Encoding (or identity)",
    {
      "accept-encoding": "identity",
    },
  );
}
