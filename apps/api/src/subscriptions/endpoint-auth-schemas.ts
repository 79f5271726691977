import { z } from "@hono/zod-openapi";
import { signatureSchemes } from "@webhooks/core";
import { text } from "../http/schemas.ts";

/**
 * The request and response fields of a subscription's signature scheme and endpoint
 * authentication (docs/api.md#signature-schemes, docs/api.md#endpoint-authentication). Secrets
 * (password, client_secret, private_key) are accepted and never returned.
 */

export const signatureScheme = z
  .enum(signatureSchemes, { error: 'signature_scheme must be "hmac-sha256" or "ed25519"' })
  .openapi({
    description:
      'How webhooks are signed: "hmac-sha256" (`v1,<base64>`, with a shared `whsec_` secret) or "ed25519" ' +
      "(`v1a,<base64>`, verified with the subscription's `public_key`). Set at create only.",
    example: "hmac-sha256",
  });

/** Printable text without control characters, of 1 to `max` characters. */
const credentialText = (name: string, max: number) =>
  text(max)
    .min(1, `${name} must not be empty`)
    .refine((value) => !/\p{Cc}/u.test(value), `${name} must not contain control characters`);

/** RFC 6749 §3.3: space-separated tokens of printable ASCII, without `"` and `\`. */
const scopeText = z
  .string()
  .regex(/^[\x21\x23-\x5b\x5d-\x7e]+(?: [\x21\x23-\x5b\x5d-\x7e]+)*$/, {
    error: 'auth.scope must be space-separated scope tokens of printable ASCII (no " or \\)',
  })
  .max(1024, "auth.scope must be at most 1024 characters");

const basicAuth = z
  .strictObject({
    type: z.literal("basic"),
    username: credentialText("auth.username", 255)
      .refine((value) => !value.includes(":"), "auth.username must not contain a colon (RFC 7617)")
      .openapi({ example: "acme" }),
    password: credentialText("auth.password", 1024).openapi({
      description: "Write-only: never returned.",
      writeOnly: true,
    }),
  })
  .openapi("BasicAuth", { description: "HTTP Basic authentication: `Authorization: Basic ...` on every attempt." });

const oauth2Auth = z
  .strictObject({
    type: z.literal("oauth2_client_credentials"),
    token_url: text(2048).openapi({
      description: "The token endpoint. It passes the same egress checks as a webhook url.",
      example: "https://auth.example.com/oauth/token",
    }),
    client_id: credentialText("auth.client_id", 255),
    client_secret: credentialText("auth.client_secret", 1024).openapi({
      description: "Write-only: never returned.",
      writeOnly: true,
    }),
    scope: scopeText.optional().openapi({ description: "Sent as `scope` in the token request.", example: "webhooks" }),
    audience: credentialText("auth.audience", 2048)
      .optional()
      .openapi({ description: "Sent as `audience` in the token request (Auth0 and others ask for it)." }),
  })
  .openapi("OAuth2ClientCredentialsAuth", {
    description:
      "OAuth 2.0 client credentials: the service gets an access token from token_url (client_secret_basic) and sends " +
      "`Authorization: Bearer <token>` on every attempt, reusing the token until shortly before it expires.",
  });

const authTypeMessage = 'auth.type must be "basic" or "oauth2_client_credentials"';

export const authInput = z
  .discriminatedUnion("type", [basicAuth, oauth2Auth], { error: authTypeMessage })
  .nullable()
  .openapi({
    description:
      "How each attempt authenticates to the endpoint: basic, oauth2_client_credentials, or null for none. Secrets are " +
      "write-only. A delivery uses the auth its subscription had when it was created.",
  });

export const clientCertificateInput = z
  .strictObject({
    certificate: z.string({ error: "client_certificate.certificate must be a PEM string" }).max(65_536).openapi({
      description: "PEM: the client certificate, optionally followed by its intermediates. It must be valid now.",
    }),
    private_key: z.string({ error: "client_certificate.private_key must be a PEM string" }).max(65_536).openapi({
      description: "PEM: the certificate's unencrypted private key. Write-only: never returned.",
      writeOnly: true,
    }),
  })
  .nullable()
  .openapi("ClientCertificateInput", {
    description: "A client certificate presented to the endpoint for mutual TLS, or null for none.",
  });

export const authResponse = z
  .discriminatedUnion("type", [
    z.object({ type: z.literal("basic"), username: z.string() }).openapi("BasicAuthSettings"),
    z
      .object({
        type: z.literal("oauth2_client_credentials"),
        token_url: z.string(),
        client_id: z.string(),
        scope: z.string().nullable(),
        audience: z.string().nullable(),
      })
      .openapi("OAuth2ClientCredentialsAuthSettings"),
  ])
  .nullable()
  .openapi({ description: "The endpoint authentication without its secret, or null for none." });

export const clientCertificateResponse = z
  .object({
    fingerprint_sha256: z.string().openapi({ example: "3A:7F:...:09" }),
    not_after: z.string().openapi({ format: "date-time", description: "When the certificate expires." }),
  })
  .nullable()
  .openapi("ClientCertificate", { description: "The client certificate for mutual TLS (never its key), or null." });

export const publicKeyResponse = z
  .string()
  .nullable()
  .openapi({
    description:
      "For ed25519: the public key (`whpk_` + base64) that verifies `v1a` signatures; it changes when the key is " +
      "rotated. null for hmac-sha256.",
    example: "whpk_Bv4Ofdxx2wo3j0t3tm9v9oJWb8RZXm8KBqhTkZmRL6Q=",
  });
