// `WEBHOOK_SECRET=whsec_... npm run receiver -- [--port 4000] [--status 200]`
// `WEBHOOK_PUBLIC_KEY=whpk_... npm run receiver` for an ed25519 subscription.
// A local endpoint for trying the service: it checks each webhook's signature (`v1` with the
// official Standard Webhooks library, `v1a` with node:crypto against the public key) and prints
// the webhook. --status makes it answer with another status, to watch retries happen.
//
// The secret comes from the environment or a file, never from the command line: `npm run` prints
// the command line with its arguments, and the shell history and `ps` keep them too. A public
// key is no secret, and may be given on the command line as well.
import { createPublicKey, type KeyObject, verify } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { parseArgs } from "node:util";
import { Webhook, WebhookVerificationError } from "standardwebhooks";

const usage = `Usage: WEBHOOK_SECRET=<whsec_...> npm run receiver -- [--port 4000] [--status 200]
       npm run receiver -- --secret-file <file holding whsec_...> [--port 4000] [--status 200]
       WEBHOOK_PUBLIC_KEY=<whpk_...> npm run receiver -- [--port 4000] [--status 200]
       npm run receiver -- --public-key <whpk_...> | --public-key-file <file> [--port 4000] [--status 200]`;
function parseCommandLine() {
  try {
    return parseArgs({
      options: {
        "secret-file": { type: "string" },
        "public-key": { type: "string" },
        "public-key-file": { type: "string" },
        // Only to refuse it with a useful message: by then npm has already printed it.
        secret: { type: "string" },
        port: { type: "string", default: "4000" },
        status: { type: "string", default: "200" },
        help: { type: "boolean", short: "h" },
      },
    }).values;
  } catch (error) {
    console.error(`${(error as Error).message}\n${usage}`);
    process.exit(1);
  }
}
const options = parseCommandLine();
if (options.help) {
  console.log(usage);
  process.exit(0);
}
if (options.secret !== undefined) {
  console.error(
    `--secret is not accepted: npm prints the command line, secret included. Set WEBHOOK_SECRET or use --secret-file.\n${usage}`,
  );
  process.exit(1);
}
const port = Number(options.port);
const status = Number(options.status);
if (!Number.isInteger(port) || port < 0 || port > 65535 || !Number.isInteger(status) || status < 100 || status > 599) {
  console.error(usage);
  process.exit(1);
}
/** One value from the environment, a file or the command line, given at most once. */
function oneOf(
  what: string,
  sources: { name: string; value: string | undefined; file?: string }[],
): string | undefined {
  const given = sources.filter((source) => source.value !== undefined);
  if (given.length > 1) {
    console.error(`Give the ${what} once: ${given.map((source) => source.name).join(" or ")}, not both.\n${usage}`);
    process.exit(1);
  }
  const [source] = given;
  if (!source?.file) return source?.value;
  try {
    return readFileSync(source.file, "utf8").trim();
  } catch (error) {
    console.error(`Cannot read ${source.name}: ${(error as Error).message}`);
    process.exit(1);
  }
}

const secretFile = options["secret-file"];
const secret = oneOf("secret", [
  { name: "WEBHOOK_SECRET", value: process.env.WEBHOOK_SECRET || undefined },
  { name: "--secret-file", value: secretFile, ...(secretFile ? { file: secretFile } : {}) },
]);
const publicKeyFile = options["public-key-file"];
const publicKeyText = oneOf("public key", [
  { name: "WEBHOOK_PUBLIC_KEY", value: process.env.WEBHOOK_PUBLIC_KEY || undefined },
  { name: "--public-key", value: options["public-key"] },
  { name: "--public-key-file", value: publicKeyFile, ...(publicKeyFile ? { file: publicKeyFile } : {}) },
]);
if (secret !== undefined && publicKeyText !== undefined) {
  console.error(`Give a secret (hmac-sha256) or a public key (ed25519), not both.\n${usage}`);
  process.exit(1);
}

let verifier: Webhook | undefined;
try {
  verifier = secret ? new Webhook(secret) : undefined;
} catch {
  // The library's message would not say which input was wrong; never echo the value itself.
  console.error(
    "The secret is not a Standard Webhooks secret (whsec_ followed by base64): check WEBHOOK_SECRET or --secret-file.",
  );
  process.exit(1);
}

/** The DER header of an ed25519 public key (RFC 8410): `whpk_` holds the 32 raw bytes after it. */
const SPKI_ED25519_HEADER = Buffer.from("302a300506032b6570032100", "hex");
let publicKey: KeyObject | undefined;
if (publicKeyText !== undefined) {
  const raw = Buffer.from(publicKeyText.replace(/^whpk_/, ""), "base64");
  if (!publicKeyText.startsWith("whpk_") || raw.length !== 32) {
    console.error("The public key is not an ed25519 public key (whpk_ followed by the base64 of 32 bytes).");
    process.exit(1);
  }
  publicKey = createPublicKey({ key: Buffer.concat([SPKI_ED25519_HEADER, raw]), format: "der", type: "spki" });
}
if (!verifier && !publicKey) {
  console.warn(
    "No secret or public key given (WEBHOOK_SECRET, --secret-file, WEBHOOK_PUBLIC_KEY, --public-key or --public-key-file): signatures will not be checked.",
  );
}

/** Standard Webhooks allows this much clock difference between sender and receiver. */
const TOLERANCE_S = 5 * 60;

/** `v1a` (ed25519): any signature of the header that verifies with the public key, of a recent timestamp. */
function verifyAsymmetric(key: KeyObject, body: string, headers: Record<string, string>): string | undefined {
  const timestamp = headers["webhook-timestamp"] ?? "";
  if (!/^\d+$/.test(timestamp)) return "missing or malformed webhook-timestamp";
  if (Math.abs(Date.now() / 1000 - Number(timestamp)) > TOLERANCE_S) return "timestamp too old or too new";
  const content = Buffer.from(`${headers["webhook-id"]}.${timestamp}.${body}`);
  const valid = (headers["webhook-signature"] ?? "")
    .split(" ")
    .filter((entry) => entry.startsWith("v1a,"))
    .some((entry) => verify(null, content, key, Buffer.from(entry.slice(4), "base64")));
  return valid ? undefined : "no v1a signature matches the public key";
}

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8");
    const headers = {
      "webhook-id": String(req.headers["webhook-id"] ?? ""),
      "webhook-timestamp": String(req.headers["webhook-timestamp"] ?? ""),
      "webhook-signature": String(req.headers["webhook-signature"] ?? ""),
    };
    let verdict = "signature not checked";
    let answer = status;
    if (verifier) {
      try {
        verifier.verify(body, headers);
        verdict = "signature valid";
      } catch (error) {
        verdict = `SIGNATURE INVALID (${error instanceof WebhookVerificationError ? error.message : String(error)})`;
        answer = 400;
      }
    } else if (publicKey) {
      const problem = verifyAsymmetric(publicKey, body, headers);
      verdict = problem === undefined ? "signature valid" : `SIGNATURE INVALID (${problem})`;
      if (problem !== undefined) answer = 400;
    }
    let pretty = body;
    try {
      pretty = JSON.stringify(JSON.parse(body), null, 2);
    } catch {
      // Not JSON: print it as it came.
    }
    console.log(
      `\n${new Date().toISOString()} ${req.method} ${req.url}  webhook-id=${headers["webhook-id"]}  ${verdict}  -> ${answer}\n${pretty}`,
    );
    res.writeHead(answer, { "content-type": "application/json" }).end(JSON.stringify({ received: answer < 300 }));
  });
});
// A port it cannot have is one line naming the option, not a stack trace.
server.once("error", (error: Error & { code?: string }) => {
  const reason =
    error.code === "EADDRINUSE"
      ? `port ${port} is already in use (EADDRINUSE). Stop what holds it or choose another with --port`
      : error.code === "EACCES"
        ? "not permitted (EACCES; ports below 1024 need privileges). Choose one from 1024 up with --port"
        : `${error.code ?? error.message}. Check --port`;
  console.error(`Cannot listen on 127.0.0.1:${port}: ${reason}.`);
  process.exit(1);
});
server.listen(port, "127.0.0.1", () => {
  console.log(`Receiving webhooks at http://127.0.0.1:${(server.address() as AddressInfo).port}/ (Ctrl-C to stop)`);
});
