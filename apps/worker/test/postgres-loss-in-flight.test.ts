import { startTestApi } from "@webhooks/api/testing";
import { loadConfig, UNKNOWN_OUTCOME_ERROR } from "@webhooks/core";
import { sql, startTcpProxy, type TcpProxy, testEnv, waitFor } from "@webhooks/testing";
import { describe, expect } from "vitest";
import { countByStatus, publishBurst } from "./burst.ts";
import { workerTest } from "./fixtures.ts";
import { subscribe } from "./stack.ts";

/**
 * PostgreSQL out of reach while requests are in flight: the receivers have the webhooks, and the
 * outcomes must still be recorded once PostgreSQL answers again, while the attempts' leases last,
 * rather than abandoned and sent again when the leases expire.
 */
const it = workerTest.extend("setup", async ({ database, receiver, inProcessWorker, defer }) => {
  /** The worker reaches PostgreSQL through a proxy; `fault` runs on it as request number `faultOn` arrives. */
  return async (fault: (proxy: TcpProxy) => void, overrides: Record<string, string> = {}, faultOn = 1) => {
    const env = testEnv(database.url, { DELIVERY_TIMEOUT: "3s", ...overrides });
    const api = await startTestApi(loadConfig(env));
    defer(() => api.close());
    const target = new URL(database.url);
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    defer(() => proxy.close());
    let requests = 0;
    const rx = await receiver(() => {
      if (++requests === faultOn) fault(proxy);
      // Answered once the fault is on: the record is what meets it.
      return { status: 200, delayMs: 200 };
    });
    const subscription = await subscribe(api, { url: rx.url });
    rx.secrets.push(subscription.secret);
    const throughProxy = new URL(database.url);
    throughProxy.port = String(proxy.port);
    await inProcessWorker({ ...env, DATABASE_URL: throughProxy.href });
    return { api, rx };
  };
});

/**
 * Each event reached the receiver once, and each delivery's log holds that request with its
 * response. It may also hold an attempt of unknown outcome that never left: a claim that
 * committed but whose answer was lost with its connection is counted, as a worker that died
 * before sending would be (docs/architecture.md#how-a-delivery-flows).
 */
async function expectSentOnceAndRecorded(
  databaseUrl: string,
  rx: { countsById(): Map<string, number> },
  ids: string[],
) {
  await waitFor(async () => (await countByStatus(databaseUrl)).delivered === ids.length, {
    timeoutMs: 30_000,
    what: "every delivery delivered",
  });
  const counts = rx.countsById();
  expect(ids.filter((id) => counts.get(id) !== 1)).toEqual([]);
  const answered = await sql<{ event_id: string; response_code: number | null }>(
    databaseUrl,
    `SELECT d.event_id, a.response_code FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id
     WHERE a.error IS DISTINCT FROM $1`,
    [UNKNOWN_OUTCOME_ERROR],
  );
  expect(answered.map((a) => a.event_id).sort()).toEqual([...ids].sort());
  expect(answered.every((a) => a.response_code === 200)).toBe(true);
}

describe("PostgreSQL lost while attempts are in flight", () => {
  it("records the outcomes once the connections it refused come back, within the leases", async ({
    database,
    setup,
  }) => {
    const { api, rx } = await setup((proxy) => {
      void proxy.refuse();
      setTimeout(() => void proxy.accept(), 2_000);
    });
    const ids = await publishBurst(api, 5, { concurrency: 5 });
    await expectSentOnceAndRecorded(database.url, rx, ids);
  });

  it("records the outcomes whose statements met a silent network path, on new connections", async ({
    database,
    setup,
  }) => {
    const { api, rx } = await setup((proxy) => proxy.blackhole(), { DATABASE_QUERY_TIMEOUT: "1s" });
    const ids = await publishBurst(api, 5, { concurrency: 5 });
    await expectSentOnceAndRecorded(database.url, rx, ids);
  });

  it("gives up on a silent connection in time to record on a new one, whatever DATABASE_QUERY_TIMEOUT", async ({
    database,
    setup,
  }) => {
    // DATABASE_QUERY_TIMEOUT outlasts the lease (8 s here), as the default (30 s) outlasts the
    // default lease: waiting it out would let the lease expire, and the deliveries be sent again.
    // The fault comes with the last request, once every claim is answered: a claim that met it
    // would wait the timeout out, sending nothing meanwhile, which is no duplicate but slow.
    const { api, rx } = await setup((proxy) => proxy.blackhole(), { DATABASE_QUERY_TIMEOUT: "10s" }, 5);
    const ids = await publishBurst(api, 5, { concurrency: 5 });
    await expectSentOnceAndRecorded(database.url, rx, ids);
  });
});
