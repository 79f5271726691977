import { mergeRequestHeaders } from "./custom-headers.ts";
import type { EndpointAuth } from "./endpoint-credentials.ts";
import type { SignatureScheme } from "./signing.ts";

/** Headers every webhook request carries (docs/receiving.md#the-request). */
export const WEBHOOK_CONTENT_TYPE = "application/json";
export const WEBHOOK_USER_AGENT = "webhook-delivery-service/1.0";

/** What stands for a value that is not shown: the rest of a signature, or a credential. */
export const ELIDED = "…";

/**
 * Words in a header's name that say its value is a credential: `Authorization`, `X-Api-Key`,
 * `X-Auth-Token`, `Cookie`, `X-Client-Secret`. Matched on the name's parts, so `X-Region` shows its
 * value; a few harmless names (`X-Author`) are hidden too, which costs nothing.
 */
const CREDENTIAL_PARTS = ["auth", "token", "secret", "passw", "cookie", "session", "credential", "signature", "jwt"];
const CREDENTIAL_WORDS = new Set(["key", "pwd", "pass", "sig", "pat", "otp", "bearer"]);

export function isCredentialHeader(name: string): boolean {
  return name
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .some(
      (part) =>
        CREDENTIAL_WORDS.has(part) || part.endsWith("key") || CREDENTIAL_PARTS.some((word) => part.includes(word)),
    );
}

/**
 * A credential's value as shown: its scheme when it has one (`Bearer …`, `Basic …`), which says
 * what kind of credential went out without giving any of it away.
 */
export function elideCredential(value: string): string {
  const scheme = /^([A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*) +\S/.exec(value);
  return scheme ? `${scheme[1]} ${ELIDED}` : ELIDED;
}

/** The scheme of the Authorization header each kind of endpoint auth sends (docs/api.md#endpoint-authentication). */
const AUTHORIZATION_SCHEMES: Record<EndpointAuth["type"], string> = {
  basic: "Basic",
  oauth2_client_credentials: "Bearer",
};

/**
 * The headers one attempt of a delivery sent, in the order sent, with nothing secret in them
 * (docs/api.md#list-a-deliverys-attempts): the delivery's custom headers (their values hidden
 * where the name says credential), then the signature headers, then the Authorization header
 * its endpoint auth adds, as its scheme alone (`Basic …`, `Bearer …`). `webhook-timestamp` is
 * the attempt's start, which is the time it is signed with; the signature is shown as its
 * scheme alone (`v1,…` or `v1a,…`), whether one or, during a rotation's overlap, two were sent.
 */
export function attemptRequestHeaders(input: {
  customHeaders: Record<string, string>;
  eventId: string;
  startedAt: Date;
  signatureScheme: SignatureScheme;
  /** The type of the delivery's endpoint auth; null for none. */
  authType: EndpointAuth["type"] | null;
}): Record<string, string> {
  const custom = Object.fromEntries(
    Object.entries(input.customHeaders).map(([name, value]) => [
      name,
      isCredentialHeader(name) ? elideCredential(value) : value,
    ]),
  );
  const headers: Record<string, string> = {
    "content-type": WEBHOOK_CONTENT_TYPE,
    "user-agent": WEBHOOK_USER_AGENT,
    // The same merge the worker makes, so a header it drops is not shown either.
    ...mergeRequestHeaders(custom, {
      "webhook-id": input.eventId,
      "webhook-timestamp": signingSeconds(input.startedAt),
      "webhook-signature": `${input.signatureScheme === "ed25519" ? "v1a" : "v1"},${ELIDED}`,
    }),
  };
  if (input.authType !== null) {
    // As the worker sets it: last, in place of any Authorization header of the delivery's own
    // (which the API refuses beside auth, so there is none unless the row predates that rule).
    for (const name of Object.keys(headers)) if (name.toLowerCase() === "authorization") delete headers[name];
    headers.authorization = `${AUTHORIZATION_SCHEMES[input.authType]} ${ELIDED}`;
  }
  return headers;
}

/** `webhook-timestamp`: whole Unix seconds. */
export const signingSeconds = (time: Date): string => Math.floor(time.getTime() / 1000).toString();
