import { formatTime } from "./format.ts";

/**
 * The API's refusals of an endpoint's authentication and client certificate
 * (docs/api.md#endpoint-authentication), in the customer's words (docs/portal.md#errors). The
 * field is the API's parameter as it is (`auth.password`, `client_certificate.private_key`): each
 * is an input of its own on the page.
 */

/** `auth.username`, `client_certificate.certificate`: the fields this file words. */
export const isCredentialField = (field: string): boolean => /^(auth|client_certificate)\./.test(field);

const NAMES: Record<string, string> = {
  "auth.type": "the sign-in method",
  "auth.username": "the user name",
  "auth.password": "the password",
  "auth.token_url": "the token URL",
  "auth.client_id": "the client ID",
  "auth.client_secret": "the client secret",
  "auth.scope": "the scope",
  "auth.audience": "the audience",
  "client_certificate.certificate": "the certificate",
  "client_certificate.private_key": "the private key",
};

const LIMITS: Record<string, string> = {
  "auth.username": "255",
  "auth.password": "1,024",
  "auth.client_id": "255",
  "auth.client_secret": "1,024",
  "auth.audience": "2,048",
};

export function explainCredential(field: string, reason: string, code: string | undefined): string {
  const name = NAMES[field] ?? field;
  const Name = name.charAt(0).toUpperCase() + name.slice(1);
  const missing = code === "parameter_missing" || /must not be empty/.test(reason);
  if (field === "auth.token_url") return explainTokenUrl(reason, code);
  if (field === "client_certificate.certificate") return explainCertificate(reason, code);
  if (field === "client_certificate.private_key") return explainPrivateKey(reason, code);
  if (field === "auth.scope")
    return "The scope is a list of names separated by single spaces, such as webhooks:write read, without quotes or backslashes. Leave it empty for none.";
  if (field === "auth.type") return "Choose how we sign in to your endpoint.";
  if (missing && (field === "auth.password" || field === "auth.client_secret"))
    return `Enter ${name}. We never show a saved one, so enter it again to save any change here.`;
  if (missing) return `Enter ${name}.`;
  if (/colon/.test(reason))
    return "The user name cannot contain a colon (:): Basic authentication puts one between the user name and the password.";
  if (/control characters/.test(reason)) return `${Name} cannot contain line breaks, tabs or other control characters.`;
  if (/at most/.test(reason)) return `${Name} is too long: ${LIMITS[field] ?? "fewer"} characters at most.`;
  return `${Name} ${reason}${reason.endsWith(".") ? "" : "."}`;
}

function explainTokenUrl(reason: string, code: string | undefined): string {
  if (/does not accept plain http/.test(reason))
    return "Use a token URL that starts with https://: we send your client secret to it, which anyone on the way could read over plain http://.";
  if (/private, loopback or link-local/.test(reason))
    return "This token URL is on a private network (such as localhost, 10.x.x.x or 192.168.x.x), which we cannot reach. Use an address your server has on the internet.";
  if (/credentials/.test(reason))
    return "Take the user name and password out of the token URL: we send the client ID and secret with each token request.";
  if (/characters long/.test(reason)) return "The token URL is too long: 2,048 characters at most.";
  if (/spaces or control characters/.test(reason)) return "The token URL must not contain spaces.";
  if (code === "parameter_missing" || /absolute URL|must start with|must not be empty/.test(reason))
    return "Enter the full address of your token endpoint, starting with https://, such as https://auth.example.com/oauth/token.";
  return `The token URL ${reason}.`;
}

/** "has expired (not after 2026-11-16T14:15:35.000Z)": the date, in the viewer's zone. */
function dateIn(reason: string): string {
  const iso = /\d{4}-\d{2}-\d{2}T[\d:.]+Z/.exec(reason)?.[0];
  return iso ? formatTime(iso) : "";
}

function explainCertificate(reason: string, code: string | undefined): string {
  if (code === "parameter_missing") return "Paste the certificate.";
  if (/has expired/.test(reason)) return `This certificate expired on ${dateIn(reason)}. Paste one that is valid now.`;
  if (/not valid yet/.test(reason))
    return `This certificate is not valid until ${dateIn(reason)}. Paste one that is valid now.`;
  if (/PEM string/.test(reason)) return "This is too long for a certificate: paste the PEM text only.";
  return "This is not a certificate we can read. Paste it in PEM form, from -----BEGIN CERTIFICATE----- to -----END CERTIFICATE-----.";
}

function explainPrivateKey(reason: string, code: string | undefined): string {
  if (code === "parameter_missing") return "Paste the certificate's private key.";
  if (/does not belong/.test(reason))
    return "This private key does not belong to the certificate. Paste the key the certificate was made for.";
  if (/PEM string/.test(reason)) return "This is too long for a private key: paste the PEM text only.";
  return "This is not a private key we can read. Paste it unencrypted, in PEM form, from its -----BEGIN … PRIVATE KEY----- line to its END line.";
}
