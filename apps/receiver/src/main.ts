// `npm run receiver -- --secret whsec_... [--port 4000] [--status 200]`
// A local endpoint for trying the service: it checks each webhook's signature with the official
// Standard Webhooks library and prints the webhook. --status makes it answer with another
// status, to watch retries happen.
import { createServer } from "node:http";
import { parseArgs } from "node:util";
import { Webhook, WebhookVerificationError } from "standardwebhooks";

const usage = "Usage: npm run receiver -- --secret <whsec_...> [--port 4000] [--status 200]";
let options;
try {
  options = parseArgs({
    options: {
      secret: { type: "string", default: process.env.WEBHOOK_SECRET },
      port: { type: "string", default: "4000" },
      status: { type: "string", default: "200" },
      help: { type: "boolean", short: "h" },
    },
  }).values;
} catch (error) {
  console.error(`${(error as Error).message}\n${usage}`);
  process.exit(1);
}
if (options.help) {
  console.log(usage);
  process.exit(0);
}
const port = Number(options.port);
const status = Number(options.status);
if (!Number.isInteger(port) || !Number.isInteger(status) || status < 100 || status > 599) {
  console.error(usage);
  process.exit(1);
}
const verifier = options.secret ? new Webhook(options.secret) : undefined;
if (!verifier) console.warn("No --secret given: signatures will not be checked.");

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
    console.log(`\n${new Date().toISOString()} ${req.method} ${req.url}  webhook-id=${headers["webhook-id"]}  ${verdict}  -> ${answer}\n${pretty}`);
    res.writeHead(answer, { "content-type": "application/json" }).end(JSON.stringify({ received: answer < 300 }));
  });
});
server.listen(port, "127.0.0.1", () => console.log(`Receiving webhooks at http://127.0.0.1:${port}/ (Ctrl-C to stop)`));
