import { startReceiver, waitFor } from "@webhooks/testing";

/**
 * What a deployment must do, checked from outside through HTTP on loopback: the compiled build
 * (packages/build/test) and the container image (.ci/image-smoke) are both held to it. An API
 * and a worker are running; this publishes an event to a receiver of its own and waits for the
 * signed delivery, and looks at the pages and probes a deployment serves.
 */
export interface SmokeTarget {
  /** The API's base URL, such as http://127.0.0.1:3000. */
  apiUrl: string;
  /** The worker's ops server (WORKER_METRICS_PORT), such as http://127.0.0.1:3001. */
  workerUrl: string;
  apiKey: string;
  /** Bull Board's Basic credentials (ADMIN_USERNAME, ADMIN_PASSWORD). */
  admin: { username: string; password: string };
}

export interface SmokeStep {
  name: string;
  detail: string;
}

/** Runs every check in turn; throws at the first that fails, naming it. Returns what each found. */
export async function smokeTest(target: SmokeTarget): Promise<SmokeStep[]> {
  const steps: SmokeStep[] = [];
  const step = async (name: string, check: () => Promise<string>) => {
    try {
      steps.push({ name, detail: await check() });
    } catch (error) {
      throw new Error(`${name}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
  };

  await step("API ready (/readyz)", async () => {
    const body = await expectOk(`${target.apiUrl}/readyz`);
    if (!body.includes('"ready"')) throw new Error(`answered ${body}`);
    return body;
  });
  await step("worker alive (/healthz)", () => expectOk(`${target.workerUrl}/healthz`));
  await step("worker metrics", async () => {
    const text = await expectOk(`${target.workerUrl}/metrics`);
    if (!text.includes("webhook_delivery_attempts_total")) throw new Error("no webhook_delivery_attempts_total");
    return `${text.length} bytes`;
  });
  await step("API metrics", async () => `${(await expectOk(`${target.apiUrl}/metrics`)).length} bytes`);
  await step("API docs and their assets", async () => {
    await expectOk(`${target.apiUrl}/docs`);
    const script = await expectOk(`${target.apiUrl}/docs/assets/swagger-ui-bundle.js`);
    return `swagger-ui-bundle.js ${script.length} bytes`;
  });
  await step("customer portal page and its script", async () => {
    const html = await expectOk(`${target.apiUrl}/portal`);
    const src = /<script type="module" src="([^"]+)"/.exec(html)?.[1];
    if (!src) throw new Error("the page names no script");
    const script = await expectOk(`${target.apiUrl}${src}`);
    return `${src} ${script.length} bytes`;
  });
  await step("Bull Board page and its assets", async () => {
    const headers = {
      authorization: `Basic ${Buffer.from(`${target.admin.username}:${target.admin.password}`).toString("base64")}`,
    };
    const html = await expectOk(`${target.apiUrl}/admin/queues`, headers);
    const src = /<script[^>]+src="([^"]+)"/.exec(html)?.[1];
    if (!src) throw new Error("the page names no script");
    const script = await expectOk(`${target.apiUrl}/admin/queues/${src.replace(/^\//, "")}`, headers);
    return `${src} ${script.length} bytes`;
  });
  await step("publish -> signed delivery", () => publishAndReceive(target));
  return steps;
}

async function expectOk(url: string, headers: Record<string, string> = {}): Promise<string> {
  const response = await fetch(url, { headers, signal: AbortSignal.timeout(10_000) });
  const body = await response.text();
  if (response.status !== 200) throw new Error(`GET ${url} answered ${response.status}: ${body.slice(0, 300)}`);
  return body;
}

/**
 * Subscribes a receiver on loopback, publishes an event, and waits for the webhook: its
 * signature must verify with the subscription's secret (the official standardwebhooks package),
 * and the delivery log must say delivered.
 */
async function publishAndReceive(target: SmokeTarget): Promise<string> {
  const receiver = await startReceiver();
  try {
    const call = async (method: string, path: string, body?: unknown) => {
      const response = await fetch(`${target.apiUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${target.apiKey}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(10_000),
      });
      const json = (await response.json()) as Record<string, unknown>;
      if (response.status >= 300)
        throw new Error(`${method} ${path} answered ${response.status}: ${JSON.stringify(json)}`);
      return json;
    };
    const subscription = await call("POST", "/v1/subscriptions", {
      url: `${receiver.url}/smoke`,
      events: ["smoke.tested"],
      description: "smoke test",
    });
    receiver.useSecret("/smoke", subscription.secret as string);
    const event = await call("POST", "/v1/events", { type: "smoke.tested", data: { check: "publish to delivery" } });
    const webhook = await waitFor(() => receiver.received[0], { timeoutMs: 30_000, what: "the webhook to arrive" });
    if (webhook.signatureValid !== true) throw new Error("the webhook arrived, but its signature did not verify");
    if (webhook.json.type !== "smoke.tested" || webhook.headers["webhook-id"] === undefined)
      throw new Error(`unexpected webhook: ${webhook.body}`);
    const delivery = await waitFor(
      async () => {
        const [latest] = (await call("GET", `/v1/deliveries?subscription_id=${subscription.id}`)).data as {
          event_id: string;
          status: string;
        }[];
        return latest?.event_id === event.id && latest?.status === "delivered" ? latest : undefined;
      },
      { timeoutMs: 15_000, what: "the delivery log to say delivered" },
    );
    await call("DELETE", `/v1/subscriptions/${subscription.id}`);
    return `event ${event.id} delivered with a valid signature (${JSON.stringify(delivery)})`;
  } finally {
    await receiver.close();
  }
}
