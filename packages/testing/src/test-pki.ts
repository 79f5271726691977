// @peculiar/x509 needs the Reflect metadata API (its dependency injection), loaded first.
import "reflect-metadata";
import { webcrypto } from "node:crypto";
import * as x509 from "@peculiar/x509";

/**
 * Certificates made at test time, never committed: a test CA, the server certificates of HTTPS
 * receivers, and client certificates for mutual TLS. ECDSA P-256, which is quick to generate.
 */

type CryptoKeyPair = webcrypto.CryptoKeyPair;
type CryptoKey = webcrypto.CryptoKey;

// Node's WebCrypto; typed apart from the DOM's Crypto, which the library's types name.
(x509.cryptoProvider as { set(crypto: unknown): void }).set(webcrypto);

const algorithm = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
const DAY_MS = 86_400_000;

export interface IssuedCertificate {
  /** PEM */
  certificate: string;
  /** PEM (PKCS #8) */
  privateKey: string;
}

export interface TestCa {
  /** The CA certificate (PEM), for a server or client to trust. */
  certificate: string;
  /** A server certificate for these DNS names and IP addresses. */
  issueServer(names: { dns?: string[]; ip?: string[] }): Promise<IssuedCertificate>;
  /** A client certificate; `validity` moves its validity window (an expired one, say). */
  issueClient(commonName: string, validity?: { notBefore: Date; notAfter: Date }): Promise<IssuedCertificate>;
}

async function newKeys(): Promise<CryptoKeyPair> {
  return (await webcrypto.subtle.generateKey(algorithm, true, ["sign", "verify"])) as CryptoKeyPair;
}

async function privateKeyPem(key: CryptoKey): Promise<string> {
  const der = Buffer.from(await webcrypto.subtle.exportKey("pkcs8", key));
  const lines = der.toString("base64").match(/.{1,64}/g) ?? [];
  return `-----BEGIN PRIVATE KEY-----\n${lines.join("\n")}\n-----END PRIVATE KEY-----\n`;
}

export async function createTestCa(name = "Webhooks Test CA"): Promise<TestCa> {
  const caKeys = await newKeys();
  const now = Date.now();
  const caCertificate = await x509.X509CertificateGenerator.createSelfSigned({
    name: `CN=${name}`,
    notBefore: new Date(now - DAY_MS),
    notAfter: new Date(now + 30 * DAY_MS),
    signingAlgorithm: algorithm,
    keys: caKeys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 1, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  });

  async function issue(
    subject: string,
    extensions: x509.Extension[],
    validity = { notBefore: new Date(Date.now() - DAY_MS), notAfter: new Date(Date.now() + 7 * DAY_MS) },
  ): Promise<IssuedCertificate> {
    const keys = await newKeys();
    const certificate = await x509.X509CertificateGenerator.create({
      subject,
      issuer: caCertificate.subject,
      ...validity,
      signingAlgorithm: algorithm,
      publicKey: keys.publicKey,
      signingKey: caKeys.privateKey,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        await x509.AuthorityKeyIdentifierExtension.create(caKeys.publicKey),
        ...extensions,
      ],
    });
    return { certificate: certificate.toString("pem"), privateKey: await privateKeyPem(keys.privateKey) };
  }

  return {
    certificate: caCertificate.toString("pem"),
    issueServer: ({ dns = [], ip = [] }) =>
      issue(`CN=${dns[0] ?? ip[0] ?? "server"}`, [
        new x509.SubjectAlternativeNameExtension([
          ...dns.map((value) => ({ type: "dns" as const, value })),
          ...ip.map((value) => ({ type: "ip" as const, value })),
        ]),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      ]),
    issueClient: (commonName, validity) =>
      issue(
        `CN=${commonName}`,
        [
          new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth]),
          new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        ],
        validity,
      ),
  };
}
