import { createPrivateKey, createPublicKey, X509Certificate } from "node:crypto";
import type { SecretBox } from "./secret-box.ts";

/**
 * How a subscription authenticates to its endpoint (docs/api.md#endpoint-authentication): an
 * `auth` scheme that puts an Authorization header on each request, and a client certificate for
 * mutual TLS. Both are stored together, sealed like the signing secrets, and the readable half
 * of each (no password, client secret or private key) is kept beside them for reads.
 */
export type EndpointAuth =
  | { type: "basic"; username: string; password: string }
  | {
      type: "oauth2_client_credentials";
      token_url: string;
      client_id: string;
      client_secret: string;
      scope?: string | undefined;
      audience?: string | undefined;
    };

export interface ClientCertificate {
  /** PEM: the certificate, optionally followed by its intermediates. */
  certificate: string;
  /** PEM: the certificate's private key (PKCS #8, PKCS #1 or SEC 1), unencrypted. */
  private_key: string;
}

/** What a subscription's reads show of its auth: everything but the password or client secret. */
export type EndpointAuthView =
  | { type: "basic"; username: string }
  | {
      type: "oauth2_client_credentials";
      token_url: string;
      client_id: string;
      scope: string | null;
      audience: string | null;
    };

/** What reads show of a client certificate. */
export interface ClientCertificateView {
  /** SHA-256 of the certificate's DER, as hex pairs separated by colons (as openssl prints it). */
  fingerprint_sha256: string;
  not_after: string;
}

/** The sealed document: what a worker needs to authenticate an attempt. */
export interface EndpointCredentials {
  auth: EndpointAuth | null;
  client_certificate: ClientCertificate | null;
}

export function authView(auth: EndpointAuth): EndpointAuthView {
  if (auth.type === "basic") return { type: "basic", username: auth.username };
  return {
    type: auth.type,
    token_url: auth.token_url,
    client_id: auth.client_id,
    scope: auth.scope ?? null,
    audience: auth.audience ?? null,
  };
}

export function sealCredentials(box: SecretBox, credentials: EndpointCredentials): Buffer {
  return box.seal(JSON.stringify(credentials));
}

/** Only the API writes the sealed document, after checking it; a row that does not parse is a bug to surface. */
export function openCredentials(box: SecretBox, sealed: Uint8Array): EndpointCredentials {
  return JSON.parse(box.open(sealed)) as EndpointCredentials;
}

export type CertificateVerdict =
  | { ok: true; view: ClientCertificateView }
  | { ok: false; field: "certificate" | "private_key"; message: string };

/**
 * Checks a client certificate as it is saved: the certificate parses (the first PEM block is the
 * client's own, any after it are intermediates sent along), it is valid now, and the private key
 * parses, is not encrypted and belongs to it. Messages never echo the key.
 */
export function inspectClientCertificate(input: ClientCertificate, now: Date): CertificateVerdict {
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(input.certificate);
  } catch {
    return { ok: false, field: "certificate", message: "must be a PEM-encoded X.509 certificate" };
  }
  if (new Date(certificate.validTo) <= now) {
    return { ok: false, field: "certificate", message: `has expired (not after ${isoOf(certificate.validTo)})` };
  }
  if (new Date(certificate.validFrom) > now) {
    return {
      ok: false,
      field: "certificate",
      message: `is not valid yet (not before ${isoOf(certificate.validFrom)})`,
    };
  }
  let matches: boolean;
  try {
    const privateKey = createPrivateKey(input.private_key);
    matches = certificate.checkPrivateKey(privateKey);
    // checkPrivateKey compares the key pair; comparing the public halves too covers key types it does not know.
    if (matches) {
      const derived = createPublicKey(privateKey).export({ format: "der", type: "spki" });
      matches = derived.equals(certificate.publicKey.export({ format: "der", type: "spki" }));
    }
  } catch {
    return {
      ok: false,
      field: "private_key",
      message: "must be an unencrypted PEM-encoded private key (PKCS #8, PKCS #1 or SEC 1)",
    };
  }
  if (!matches) return { ok: false, field: "private_key", message: "does not belong to the certificate" };
  return {
    ok: true,
    view: { fingerprint_sha256: certificate.fingerprint256, not_after: isoOf(certificate.validTo) },
  };
}

function isoOf(opensslDate: string): string {
  return new Date(opensslDate).toISOString();
}
