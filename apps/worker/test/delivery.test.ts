import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { waitFor } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { workerTest as it } from "./fixtures.ts";
import { deliveriesOf, publish, type Stack, subscribe } from "./stack.ts";

async function delivery(s: Stack, id: string) {
  return (await s.api.call("GET", `/v1/deliveries/${id}`)).body;
}

/**
 * The delivery once no attempt of it is in flight, else undefined: `attempts` counts an attempt
 * from the moment it starts, and these tests look at attempts whose outcome is recorded.
 */
async function settled(s: Stack, id: string) {
  // The log first, then the delivery: an outcome and the delivery's state commit together, so if
  // the log's newest attempt has its outcome and the counts agree, the delivery shows that state.
  const log = await attempts(s, id);
  const latest = log[0];
  if (latest !== undefined && latest.duration_ms === null && latest.error === null) return undefined;
  const current = await delivery(s, id);
  return current.attempts === log.length ? current : undefined;
}

async function attempts(s: Stack, id: string) {
  return (await s.api.call("GET", `/v1/deliveries/${id}/attempts`)).body.data as Record<string, any>[];
}

describe("a delivery", () => {
  it("arrives signed per Standard Webhooks, verified by the standardwebhooks package", async ({ stack, receiver }) => {
    const s = await stack();
    const rx = await receiver();
    const sub = await subscribe(s.api, { url: `${rx.url}/hooks/billing`, events: ["invoice.paid"] });
    rx.secrets.push(sub.secret);
    const eventId = (
      await publish(s.api, { type: "invoice.paid", data: { invoice: "in_42", amount: 4200, note: "héllo ✓" } })
    ).id;
    const [created] = await deliveriesOf(s.api, eventId);

    await waitFor(async () => (await delivery(s, created!.id)).status === "delivered", { what: "delivered" });
    expect(rx.received).toHaveLength(1);
    const webhook = rx.received[0]!;
    expect(webhook.signatureValid).toBe(true);
    expect(webhook.path).toBe("/hooks/billing");
    expect(webhook.headers["content-type"]).toBe("application/json");
    expect(webhook.headers["webhook-id"]).toBe(eventId);
    expect(Math.abs(Number(webhook.headers["webhook-timestamp"]) - Date.now() / 1000)).toBeLessThan(30);
    expect(webhook.headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    const event = (await s.api.call("GET", `/v1/events/${eventId}`)).body;
    expect(webhook.json).toEqual({
      type: "invoice.paid",
      timestamp: event.created_at,
      data: { invoice: "in_42", amount: 4200, note: "héllo ✓" },
    });

    expect(await delivery(s, created!.id)).toMatchObject({
      status: "delivered",
      attempts: 1,
      response_code: 200,
      next_retry_at: null,
    });
    const log = await attempts(s, created!.id);
    expect(log).toHaveLength(1);
    expect(log[0]).toMatchObject({
      object: "delivery_attempt",
      number: 1,
      response_code: 200,
      response_body: "ok",
      error: null,
      url: `${rx.url}/hooks/billing`,
    });
    expect(log[0]!.duration_ms).toBeGreaterThanOrEqual(0);
  });

  it("lists in its attempt log the headers each attempt sent, secrets elided and nothing else changed", async ({
    stack,
    receiver,
  }) => {
    const s = await stack({ RETRY_SCHEDULE: "1100ms" });
    const replies = [500, 200];
    const rx = await receiver((_, index) => ({ status: replies[index] ?? 200 }));
    const sub = await subscribe(s.api, {
      url: rx.url,
      headers: { Authorization: "Bearer t0ken-of-the-receiver", "X-Region": "eu" },
    });
    rx.secrets.push(sub.secret);
    const eventId = (await publish(s.api, { type: "invoice.paid", data: { n: 1 } })).id;
    const [created] = await deliveriesOf(s.api, eventId);
    await waitFor(async () => (await settled(s, created!.id))?.status === "delivered", { what: "delivered" });

    const log = await attempts(s, created!.id);
    expect(log).toHaveLength(2);
    // Newest first in the log, in arrival order at the receiver.
    for (const [attempt, webhook] of [
      [log[1]!, rx.received[0]!],
      [log[0]!, rx.received[1]!],
    ] as const) {
      const shown: Record<string, string> = attempt.request_headers;
      const sent = Object.entries(webhook.headers).filter(
        ([name]) => !["host", "connection", "content-length"].includes(name),
      );
      expect(Object.keys(shown).map((name) => name.toLowerCase())).toEqual(sent.map(([name]) => name));
      for (const [name, value] of Object.entries(shown)) {
        const received = String(webhook.headers[name.toLowerCase()]);
        // An elided value shows its scheme alone: "v1,…", "Bearer …".
        if (value.endsWith("…")) expect(received.startsWith(value.slice(0, -1))).toBe(true);
        else expect(received).toBe(value);
      }
      expect(shown["webhook-signature"]).toBe("v1,…");
      expect(shown.Authorization).toBe("Bearer …");
      expect(shown["webhook-timestamp"]).toBe(String(Math.floor(Date.parse(attempt.started_at) / 1000)));
    }
    expect(JSON.stringify(log)).not.toContain("t0ken-of-the-receiver");
  });

  it("goes queued -> failed (retry scheduled) -> failed (retry scheduled) -> delivered", async ({
    stack,
    receiver,
  }) => {
    const s = await stack({ RETRY_SCHEDULE: "1500ms,1500ms,1500ms" });
    const replies = [500, 503, 200];
    // The first answer waits a moment, so that the state read right after the publish is the
    // created one whatever the worker has done by then.
    const rx = await receiver((_, index) => ({ status: replies[index] ?? 200, delayMs: index === 0 ? 500 : 0 }));
    await subscribe(s.api, { url: rx.url });
    const eventId = (await publish(s.api, { type: "state.walk", data: {} })).id;
    const [created] = await deliveriesOf(s.api, eventId);
    expect(created).toMatchObject({ status: "queued", response_code: null, next_retry_at: null });
    // 0, or 1 if the worker has already begun the first attempt: the claim counts an attempt before
    // its request leaves (docs/api.md#delivery-states), so `attempts` never hides a request in
    // flight.
    expect([0, 1]).toContain(created!.attempts);

    const seen: Record<string, any>[] = [];
    for (const attempt of [1, 2, 3]) {
      const state = await waitFor(
        async () => {
          const current = await settled(s, created!.id);
          return current?.attempts === attempt ? current : undefined;
        },
        { what: `attempt ${attempt}` },
      );
      seen.push({ ...state, observedAt: Date.now() });
    }
    expect(seen[0]).toMatchObject({ status: "failed", attempts: 1, response_code: 500 });
    expect(seen[1]).toMatchObject({ status: "failed", attempts: 2, response_code: 503 });
    expect(seen[2]).toMatchObject({ status: "delivered", attempts: 3, response_code: 200, next_retry_at: null });
    for (const state of seen.slice(0, 2)) {
      // 1.5 s ±20% after the attempt.
      const wait = Date.parse(state.next_retry_at) - state.observedAt;
      expect(wait).toBeGreaterThan(1200 - 400);
      expect(wait).toBeLessThanOrEqual(1800);
    }
    const gaps = rx.received.slice(1).map((w, i) => w.receivedAt - rx.received[i]!.receivedAt);
    for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(1200 - 50);
    expect((await attempts(s, created!.id)).map((a) => [a.number, a.response_code])).toEqual([
      [3, 200],
      [2, 503],
      [1, 500],
    ]);
  });

  it("fails for good after the last step of the schedule", async ({ stack, receiver }) => {
    const s = await stack({ RETRY_SCHEDULE: "50ms,50ms" });
    const rx = await receiver(() => ({ status: 500, body: "boom" }));
    await subscribe(s.api, { url: rx.url });
    const [created] = await deliveriesOf(s.api, (await publish(s.api, { type: "always.fails", data: {} })).id);
    const final = await waitFor(async () => {
      const current = await settled(s, created!.id);
      return current?.attempts === 3 && current.next_retry_at === null ? current : undefined;
    });
    expect(final).toMatchObject({ status: "failed", attempts: 3, response_code: 500, next_retry_at: null });
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(rx.received).toHaveLength(3);
    const log = await attempts(s, created!.id);
    expect(log.map((a) => a.number)).toEqual([3, 2, 1]);
    expect(log.every((a) => a.response_body === "boom" && a.response_code === 500)).toBe(true);
  });

  it("stops retrying on 410 Gone", async ({ stack, receiver }) => {
    const s = await stack({ RETRY_SCHEDULE: "50ms,50ms" });
    const rx = await receiver(() => ({ status: 410 }));
    await subscribe(s.api, { url: rx.url });
    const [created] = await deliveriesOf(s.api, (await publish(s.api, { type: "gone.away", data: {} })).id);
    await waitFor(async () => (await settled(s, created!.id))?.attempts === 1);
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(await delivery(s, created!.id)).toMatchObject({
      status: "failed",
      attempts: 1,
      response_code: 410,
      next_retry_at: null,
    });
    expect(rx.received).toHaveLength(1);
  });

  it("honours Retry-After on 429 and 503, capped by MAX_RETRY_AFTER", async ({ stack, receiver }) => {
    const s = await stack({ RETRY_SCHEDULE: "100ms,100ms,2s", MAX_RETRY_AFTER: "2s" });
    const rx = await receiver((_, index) =>
      index === 0
        ? { status: 429, headers: { "retry-after": "1" } }
        : index === 1
          ? { status: 503, headers: { "retry-after": "3600" } }
          : { status: 200 },
    );
    await subscribe(s.api, { url: rx.url });
    const [created] = await deliveriesOf(s.api, (await publish(s.api, { type: "slow.down", data: {} })).id);
    await waitFor(async () => (await delivery(s, created!.id)).status === "delivered", { timeoutMs: 15_000 });
    const [first, second, third] = rx.received;
    // Asked for 1 s although the schedule said 100 ms.
    expect(second!.receivedAt - first!.receivedAt).toBeGreaterThanOrEqual(950);
    // Asked for an hour: the subscription is held for MAX_RETRY_AFTER (2 s), and the delivery's
    // own retry is capped at the schedule's longest step (2 s ±20%).
    expect(third!.receivedAt - second!.receivedAt).toBeGreaterThanOrEqual(1950);
    expect(third!.receivedAt - second!.receivedAt).toBeLessThan(3500);
  });

  it("records a timeout as an attempt without a response code", async ({ stack, receiver }) => {
    const s = await stack({ DELIVERY_TIMEOUT: "300ms", RETRY_SCHEDULE: "5s" });
    const rx = await receiver(() => ({ status: 200, delayMs: 2_000 }));
    await subscribe(s.api, { url: rx.url });
    const [created] = await deliveriesOf(s.api, (await publish(s.api, { type: "too.slow", data: {} })).id);
    // attempts counts the attempt from the moment it starts; its outcome comes with the status.
    const state = await waitFor(async () => {
      const current = await settled(s, created!.id);
      return current?.attempts === 1 && current.status === "failed" ? current : undefined;
    });
    expect(state).toMatchObject({ status: "failed", response_code: null });
    expect(state.next_retry_at).not.toBeNull();
    const [attempt] = await attempts(s, created!.id);
    expect(attempt).toMatchObject({ response_code: null, response_body: null, error: "timeout after 300 ms" });
    expect(attempt!.duration_ms).toBeGreaterThanOrEqual(290);
    expect(attempt!.duration_ms).toBeLessThan(1_500);
  });

  it("counts a 2xx whose body never arrives in full as delivered: the answer came, only its excerpt is cut short", async ({
    stack,
    defer,
  }) => {
    const s = await stack({ DELIVERY_TIMEOUT: "500ms", RETRY_SCHEDULE: "1s" });
    const requests: string[] = [];
    // /trickle answers 200 and then writes its body a byte every 100 ms, past the attempt's time;
    // /dropped promises 100 bytes, sends 2 and drops the connection.
    const server = createServer((request, response) => {
      request.resume();
      request.on("end", () => {
        requests.push(request.url ?? "");
        if (request.url === "/dropped") {
          response.writeHead(200, { "content-length": "100" });
          response.write("ok", () => setTimeout(() => response.socket?.destroy(), 20));
          return;
        }
        response.writeHead(200, { "content-type": "text/plain" });
        response.write("accepted");
        const trickle = setInterval(() => response.write("."), 100);
        response.on("close", () => clearInterval(trickle));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    defer(async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    });
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    for (const [path, error] of [
      ["trickle", "response body incomplete: timeout after 500 ms"],
      ["dropped", "response body incomplete: connection reset"],
    ] as const) {
      const sub = await subscribe(s.api, { url: `${base}/${path}`, events: [path] });
      const [created] = await deliveriesOf(s.api, (await publish(s.api, { type: path, data: {} })).id);
      const state = await waitFor(async () => {
        const current = await settled(s, created!.id);
        return current?.attempts === 1 ? current : undefined;
      });
      expect(state).toMatchObject({
        subscription_id: sub.id,
        status: "delivered",
        response_code: 200,
        next_retry_at: null,
      });
      const [attempt] = await attempts(s, created!.id);
      expect(attempt).toMatchObject({ response_code: 200, error });
      expect(attempt!.response_body).toMatch(path === "trickle" ? /^accepted\.*$/ : /^ok$/);
    }
    expect(requests).toEqual(["/trickle", "/dropped"]);
  });

  it("records a refused connection", async ({ stack }) => {
    const s = await stack({ RETRY_SCHEDULE: "5s" });
    await subscribe(s.api, { url: "http://127.0.0.1:9/nothing-listens" });
    const [created] = await deliveriesOf(s.api, (await publish(s.api, { type: "no.listener", data: {} })).id);
    await waitFor(async () => (await settled(s, created!.id))?.attempts === 1);
    const [attempt] = await attempts(s, created!.id);
    expect(attempt).toMatchObject({ response_code: null, error: "connection refused" });
  });

  it("does not follow redirects: a 3xx is a failure", async ({ stack, receiver }) => {
    const s = await stack({ RETRY_SCHEDULE: "5s" });
    const target = await receiver();
    const rx = await receiver(() => ({ status: 302, headers: { location: `${target.url}/elsewhere` } }));
    await subscribe(s.api, { url: rx.url });
    const [created] = await deliveriesOf(s.api, (await publish(s.api, { type: "moved.away", data: {} })).id);
    await waitFor(async () => (await settled(s, created!.id))?.attempts === 1);
    expect(await delivery(s, created!.id)).toMatchObject({ status: "failed", response_code: 302 });
    expect(target.received).toHaveLength(0);
  });

  it("keeps only the first 4 KiB of a large response, NUL bytes included", async ({ stack, receiver }) => {
    const s = await stack({ RETRY_SCHEDULE: "5s" });
    const rx = await receiver(() => ({ status: 500, body: `\u0000${"é".repeat(60_000)}` }));
    await subscribe(s.api, { url: rx.url });
    const [created] = await deliveriesOf(s.api, (await publish(s.api, { type: "big.answer", data: {} })).id);
    await waitFor(async () => (await settled(s, created!.id))?.attempts === 1);
    const [attempt] = await attempts(s, created!.id);
    expect(Buffer.byteLength(attempt!.response_body, "utf8")).toBeLessThanOrEqual(4 * 1024);
    expect(Buffer.byteLength(attempt!.response_body, "utf8")).toBeGreaterThan(4 * 1024 - 4);
    expect(attempt!.response_body).toMatch(/^é+$/);
    expect(attempt!.response_body).not.toContain("\u0000");
  });
});

describe("manual resend", () => {
  it("attempts a delivered delivery again within a second", async ({ stack, receiver }) => {
    const s = await stack();
    const rx = await receiver();
    await subscribe(s.api, { url: rx.url });
    const [created] = await deliveriesOf(s.api, (await publish(s.api, { type: "resend.me", data: {} })).id);
    await waitFor(async () => (await delivery(s, created!.id)).status === "delivered");

    const asked = Date.now();
    const response = await s.api.call("POST", `/v1/deliveries/${created!.id}/retry`);
    expect(response.status).toBe(202);
    expect(response.body).toMatchObject({ status: "queued", next_retry_at: null });
    await waitFor(() => rx.received.length === 2, { timeoutMs: 1_000, intervalMs: 10 });
    expect(rx.received[1]!.receivedAt - asked).toBeLessThan(1_000);
    await waitFor(async () => (await settled(s, created!.id))?.attempts === 2);
    expect(await delivery(s, created!.id)).toMatchObject({ status: "delivered", attempts: 2 });
    // The same webhook-id: receivers can tell it is the same event.
    expect(rx.received[1]!.headers["webhook-id"]).toBe(rx.received[0]!.headers["webhook-id"]);
  });

  it("brings a retry scheduled an hour away forward", async ({ stack, receiver }) => {
    const s = await stack({ RETRY_SCHEDULE: "1h" });
    const rx = await receiver((_, index) => ({ status: index === 0 ? 500 : 200 }));
    await subscribe(s.api, { url: rx.url });
    const [created] = await deliveriesOf(s.api, (await publish(s.api, { type: "resend.early", data: {} })).id);
    const failed = await waitFor(async () => {
      const current = await settled(s, created!.id);
      return current?.attempts === 1 ? current : undefined;
    });
    expect(Date.parse(failed.next_retry_at) - Date.now()).toBeGreaterThan(40 * 60_000);

    const asked = Date.now();
    expect((await s.api.call("POST", `/v1/deliveries/${created!.id}/retry`)).status).toBe(202);
    await waitFor(() => rx.received.length === 2, { timeoutMs: 1_000, intervalMs: 10 });
    expect(rx.received[1]!.receivedAt - asked).toBeLessThan(1_000);
    await waitFor(async () => (await delivery(s, created!.id)).status === "delivered");
  });

  it("gives a delivery that failed for good one more attempt", async ({ stack, receiver }) => {
    const s = await stack({ RETRY_SCHEDULE: "50ms" });
    let healthy = false;
    const rx = await receiver(() => ({ status: healthy ? 200 : 500 }));
    await subscribe(s.api, { url: rx.url });
    const [created] = await deliveriesOf(s.api, (await publish(s.api, { type: "resend.final", data: {} })).id);
    await waitFor(async () => {
      const current = await settled(s, created!.id);
      return current?.attempts === 2 && current.next_retry_at === null;
    });
    healthy = true;
    await s.api.call("POST", `/v1/deliveries/${created!.id}/retry`);
    await waitFor(async () => (await delivery(s, created!.id)).status === "delivered", { timeoutMs: 2_000 });
    expect(await delivery(s, created!.id)).toMatchObject({ attempts: 3, response_code: 200, next_retry_at: null });
  });
});

describe("snapshot semantics (docs/api.md#updates-apply-to-the-next-delivery)", () => {
  it("keeps retries on the old url after an update; new events go to the new one", async ({ stack, receiver }) => {
    const s = await stack({ RETRY_SCHEDULE: "400ms,400ms,400ms" });
    const a = await receiver(() => ({ status: 500 }));
    const b = await receiver();
    const sub = await subscribe(s.api, { url: `${a.url}/a` });
    a.secrets.push(sub.secret);
    b.secrets.push(sub.secret);
    const [old] = await deliveriesOf(s.api, (await publish(s.api, { type: "snap.shot", data: {} })).id);
    await waitFor(() => a.received.length === 1, { what: "first attempt at A" });

    const updated = await s.api.call("PUT", `/v1/subscriptions/${sub.id}`, { json: { url: `${b.url}/b` } });
    expect(updated.body.url).toBe(`${b.url}/b`);
    await waitFor(
      async () => {
        const current = await settled(s, old!.id);
        return current?.attempts === 4 && current.next_retry_at === null;
      },
      { what: "retries exhausted" },
    );
    expect(a.received).toHaveLength(4);
    expect(a.received.every((w) => w.path === "/a" && w.signatureValid)).toBe(true);
    expect(b.received).toHaveLength(0);
    expect((await attempts(s, old!.id)).every((attempt) => attempt.url === `${a.url}/a`)).toBe(true);

    // The secret did not change with the update: B verifies with the same one.
    const [fresh] = await deliveriesOf(s.api, (await publish(s.api, { type: "snap.shot", data: {} })).id);
    await waitFor(async () => (await delivery(s, fresh!.id)).status === "delivered");
    expect(b.received).toHaveLength(1);
    expect(b.received[0]).toMatchObject({ path: "/b", signatureValid: true });
    expect(a.received).toHaveLength(4);
  });

  it("does not cancel deliveries created before a pause or an events change", async ({ stack, receiver }) => {
    const s = await stack({ RETRY_SCHEDULE: "300ms,300ms" });
    let healthy = false;
    const rx = await receiver(() => ({ status: healthy ? 200 : 500 }));
    const sub = await subscribe(s.api, { url: rx.url, events: ["pause.me"] });
    const [created] = await deliveriesOf(s.api, (await publish(s.api, { type: "pause.me", data: {} })).id);
    await waitFor(() => rx.received.length === 1);
    await s.api.call("PUT", `/v1/subscriptions/${sub.id}`, { json: { active: false, events: ["something.else"] } });
    healthy = true;
    await waitFor(async () => (await delivery(s, created!.id)).status === "delivered", {
      what: "delivered after pause",
    });
    expect(await delivery(s, created!.id)).toMatchObject({ attempts: 2, response_code: 200 });
    // While paused, new events get nothing.
    const eventId = (await publish(s.api, { type: "pause.me", data: {} })).id;
    expect(await deliveriesOf(s.api, eventId)).toEqual([]);
  });
});

describe("egress safety in production mode", () => {
  it("refuses loopback at connect time, for names and literals alike", async ({ stack, receiver, inProcessWorker }) => {
    // The API runs with the development policy so the subscription can be created; the worker
    // runs with production's refusal of private addresses. A long retry step keeps each delivery
    // at its first attempt while the test looks at it.
    const s = await stack({ RETRY_SCHEDULE: "1m" });
    await s.worker.close();
    await inProcessWorker({ ...s.env, ALLOW_HTTP_URLS: "true", ALLOW_PRIVATE_DESTINATIONS: "false" });
    const rx = await receiver();
    const port = new URL(rx.url).port;
    await subscribe(s.api, { url: `http://localhost:${port}/by-name`, events: ["egress.test"] });
    await subscribe(s.api, { url: `http://127.0.0.1:${port}/by-ip`, events: ["egress.test"] });
    await subscribe(s.api, { url: `http://[::ffff:127.0.0.1]:${port}/mapped`, events: ["egress.test"] });
    const eventId = (await publish(s.api, { type: "egress.test", data: {} })).id;
    const created = await deliveriesOf(s.api, eventId);
    expect(created).toHaveLength(3);
    for (const d of created) {
      await waitFor(async () => (await settled(s, d.id))?.attempts === 1);
      const [attempt] = await attempts(s, d.id);
      expect(attempt!.error).toMatch(/^destination not allowed/);
      expect(attempt!.response_code).toBeNull();
    }
    expect(rx.received).toHaveLength(0);
  });
});
