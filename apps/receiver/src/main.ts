// `WEBHOOK_SECRET=whsec_... npm run receiver -- [--port 4000] [--status 200]`
// A local endpoint for trying the service: it checks each webhook's signature with the official
// Standard Webhooks library and prints the webhook. --status makes it answer with another
// status, to watch retries happen.
//
// The secret comes from the environment or a file, never from the command line: `npm run` prints
// the command line with its arguments, and the shell history and `ps` keep them too.
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { parseArgs } from "node:util";
import { Webhook, WebhookVerificationError } from "standardwebhooks";

const usage = `Usage: WEBHOOK_SECRET=<whsec_...> npm run receiver -- [--port 4000] [--status 200]
       npm run receiver -- --secret-file <file holding whsec_...> [--port 4000] [--status 200]`;
function parseCommandLine() {
  try {
    return parseArgs({
      options: {
        "secret-file": { type: "string" },
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
let secret = process.env.WEBHOOK_SECRET || undefined;
if (options["secret-file"] !== undefined) {
  if (secret) {
    console.error(`Give the secret once: WEBHOOK_SECRET or --secret-file, not both.\n${usage}`);
    process.exit(1);
  }
  try {
    secret = readFileSync(options["secret-file"], "utf8").trim();
  } catch (error) {
    console.error(`Cannot read --secret-file: ${(error as Error).message}`);
    process.exit(1);
  }
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
if (!verifier) console.warn("No secret given (WEBHOOK_SECRET or --secret-file): signatures will not be checked.");

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
