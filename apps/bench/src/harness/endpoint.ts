import { randomBytes } from "node:crypto";
import { rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  createTestCa,
  type ReceiverOptions,
  startEgressProxy,
  startReceiver,
  startTokenServer,
} from "@webhooks/testing";
import type { Context } from "../phase.ts";
import { onCleanup } from "./cleanup.ts";
import { RUN_PREFIX } from "./config.ts";
import { round } from "./stats.ts";

export const ENDPOINT_AUTHS = ["basic", "oauth2", "mtls"] as const;
export type EndpointAuth = (typeof ENDPOINT_AUTHS)[number];

/** A receiver, what a subscription to it needs, what the workers need to reach it, and what to add to the report. */
export type Endpoint = Awaited<ReturnType<typeof startEndpoint>>;

/**
 * With --endpoint-auth or --egress-proxy, a verifying receiver of the phase's own that refuses
 * every request without the credential (401 without the Authorization header, a failed handshake
 * without the client certificate), so a broken setup shows as webhooks not delivered; and the
 * egress proxy the workers send through. Otherwise the shared receiver, reached directly.
 */
export async function startEndpoint(context: Context) {
  const { endpointAuth: auth, egressProxy: viaProxy } = context;
  const [subscription, workerEnv]: [Record<string, unknown>, Record<string, string>] = [{}, {}];
  if (auth === undefined && !viaProxy) {
    return { receiver: context.receiver, subscription, workerEnv, describe: () => [] };
  }
  const secret = randomBytes(16).toString("hex");
  const options: ReceiverOptions = { verifyWith: "core", record: false, keepAliveTimeoutMs: 60_000 };
  if (auth === "basic") {
    subscription.auth = { type: "basic", username: "bench", password: secret };
    const expected = `Basic ${Buffer.from(`bench:${secret}`).toString("base64")}`;
    options.authorize = (authorization) => authorization === expected;
  } else if (auth === "oauth2") {
    const tokens = await startTokenServer({ id: "bench", secret });
    onCleanup("close the token server", () => tokens.close());
    const client = { client_id: "bench", client_secret: secret };
    subscription.auth = { type: "oauth2_client_credentials", token_url: tokens.url, ...client };
    options.authorize = (authorization) => tokens.isValid(authorization);
  } else if (auth === "mtls") {
    const ca = await createTestCa("Bench CA");
    const client = await ca.issueClient("bench");
    options.tls = { ...(await ca.issueServer({ ip: ["127.0.0.1"] })), clientCa: ca.certificate };
    subscription.client_certificate = { certificate: client.certificate, private_key: client.privateKey };
    // The workers trust the CA as production trusts a private one: NODE_EXTRA_CA_CERTS.
    const caFile = join(tmpdir(), `${RUN_PREFIX}-ca.pem`);
    writeFileSync(caFile, ca.certificate);
    onCleanup("delete the test CA's file", async () => rmSync(caFile, { force: true }));
    workerEnv.NODE_EXTRA_CA_CERTS = caFile;
  }
  const receiver = await startReceiver(undefined, options);
  onCleanup("close the endpoint's receiver", () => receiver.close());
  const egress = viaProxy ? await startEgressProxy() : undefined;
  if (egress) {
    onCleanup("close the egress proxy", () => egress.close());
    workerEnv.EGRESS_PROXY_URL = egress.url;
  }
  // The proxy's count shows that the traffic went through it: a CONNECT per connection for https.
  const through = () => (egress ? `through the egress proxy (${round(egress.requests.length)} requests)` : "direct");
  return { receiver, subscription, workerEnv, describe: () => [`${through()}, endpoint auth ${auth ?? "none"}`] };
}
