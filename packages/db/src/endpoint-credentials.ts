import {
  authView,
  type ClientCertificate,
  type ClientCertificateView,
  checkDestinationUrl,
  type DestinationPolicy,
  type EndpointAuth,
  type EndpointAuthView,
  type EndpointCredentials,
  inspectClientCertificate,
  newId,
  openCredentials,
  type SecretBox,
  sealCredentials,
  urlSpellingProblem,
  ValidationError,
} from "@webhooks/core";
import { Prisma, type PrismaClientOrTransaction } from "./client.ts";

/**
 * A subscription's endpoint credentials (docs/api.md#endpoint-authentication): checked as they
 * are saved, sealed into an endpoint_credentials row that never changes, and the readable half
 * copied onto the subscription for reads. Deliveries copy the row's id when they are created.
 */

/** What the subscription row holds of its credentials. */
export interface CredentialColumns {
  credentialsId: string | null;
  auth: EndpointAuthView | null;
  clientCertificate: ClientCertificateView | null;
}

/**
 * Checks what can be checked before anything is written: the token endpoint passes the same
 * egress rules as a webhook url (the worker checks its address again when it connects), and the
 * client certificate parses, is valid now and matches its key. Returns the certificate's view.
 */
export function checkCredentials(
  input: { auth?: EndpointAuth | null | undefined; clientCertificate?: ClientCertificate | null | undefined },
  policy: DestinationPolicy,
  now: Date,
): ClientCertificateView | null | undefined {
  if (input.auth?.type === "oauth2_client_credentials") {
    const text = input.auth.token_url;
    const verdict = checkDestinationUrl(text, policy);
    const problem = verdict.ok ? urlSpellingProblem(text, verdict.url) : verdict.reason;
    if (problem) throw new ValidationError(`auth.token_url ${problem}`, "url_invalid", "auth.token_url");
  }
  if (!input.clientCertificate) return input.clientCertificate;
  const verdict = inspectClientCertificate(input.clientCertificate, now);
  if (!verdict.ok) {
    const param = `client_certificate.${verdict.field}`;
    throw new ValidationError(`${param} ${verdict.message}`, "parameter_invalid", param);
  }
  return verdict.view;
}

/**
 * An Authorization header of the subscription's own would be replaced by the one `auth` makes:
 * refused instead, so that what is saved is what is sent.
 */
export function assertNoAuthorizationConflict(headers: Record<string, string>, hasAuth: boolean): void {
  if (!hasAuth) return;
  const name = Object.keys(headers).find((header) => header.toLowerCase() === "authorization");
  if (name !== undefined) {
    throw new ValidationError(
      `headers.${name} cannot be set together with auth, which sends its own Authorization header`,
      "parameter_invalid",
      `headers.${name}`,
    );
  }
}

/** Seals the credentials into a new row (none when both halves are null) and returns the subscription's columns. */
export async function writeCredentials(
  db: PrismaClientOrTransaction,
  box: SecretBox,
  credentials: EndpointCredentials,
  clientCertificate: ClientCertificateView | null,
): Promise<CredentialColumns> {
  if (credentials.auth === null && credentials.client_certificate === null) {
    return { credentialsId: null, auth: null, clientCertificate: null };
  }
  const id = newId("credentials");
  await db.endpointCredentials.create({
    data: { id, ciphertext: new Uint8Array(sealCredentials(box, credentials)) },
  });
  return {
    credentialsId: id,
    auth: credentials.auth === null ? null : authView(credentials.auth),
    clientCertificate,
  };
}

/**
 * Marks a row its subscription no longer uses (replaced, or the subscription deleted): the pruner
 * deletes it once no delivery refers to it (pruneRetiredCredentials in retention.ts).
 */
export async function retireCredentials(db: PrismaClientOrTransaction, id: string): Promise<void> {
  // The database's clock, which the pruner measures the grace with.
  await db.$executeRaw`UPDATE endpoint_credentials SET retired_at = now() WHERE id = ${id} AND retired_at IS NULL`;
}

/** The sealed credentials a subscription points at, opened; both halves null when it has none. */
export async function readCredentials(
  db: PrismaClientOrTransaction,
  box: SecretBox,
  credentialsId: string | null,
): Promise<EndpointCredentials> {
  if (credentialsId === null) return { auth: null, client_certificate: null };
  const row = await db.endpointCredentials.findUniqueOrThrow({ where: { id: credentialsId } });
  return openCredentials(box, row.ciphertext);
}

/** Prisma writes SQL NULL into a JSON column only when told so. */
export function jsonOrNull(value: object | null): Prisma.InputJsonValue | typeof Prisma.DbNull {
  return value === null ? Prisma.DbNull : (value as Prisma.InputJsonValue);
}
