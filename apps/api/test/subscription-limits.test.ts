import { startTestApi, subscribe, type TestApi } from "@webhooks/api/testing";
import { sql, type TestDatabase, testConfig } from "@webhooks/testing";
import { describe, expect } from "vitest";
import {
  type CreateSubscriptionRequest,
  createdSubscriptionSchema,
  subscriptionListSchema,
  subscriptionSchema,
} from "../src/subscriptions/schemas.ts";
import { apiTest } from "./fixtures.ts";

const test = apiTest();

const create = (api: TestApi, body: Partial<CreateSubscriptionRequest> = {}) =>
  subscribe(api, { events: ["invoice.paid"], ...body });

/** A subscription's limits (max_in_flight, rate_limit) and the health the workers keep for it. */
describe("endpoint isolation settings and health", () => {
  const healthy = {
    state: "healthy",
    consecutive_failures: 0,
    last_success_at: null,
    last_failure_at: null,
    retry_at: null,
  };

  async function row(database: TestDatabase, id: string) {
    const [found] = await sql(database.url, "SELECT * FROM subscriptions WHERE id = $1", [id]);
    return found;
  }

  test("defaults max_in_flight to DEFAULT_MAX_IN_FLIGHT and rate_limit to null, with a healthy health", async ({
    api,
    database,
  }) => {
    const created = await create(api);
    expect(created).toMatchObject({ max_in_flight: 25, rate_limit: null, health: healthy, disabled_reason: null });
    expect(await row(database, created.id)).toMatchObject({
      max_in_flight: 25,
      rate_limit: null,
      disabled_reason: null,
    });
    for (const response of [
      await api.get(`/v1/subscriptions/${created.id}`, 200, { schema: subscriptionSchema }),
      await api.get("/v1/subscriptions?limit=1", 200, { schema: subscriptionListSchema }),
    ]) {
      const shown = response.body.object === "list" ? response.body.data[0] : response.body;
      expect(shown).toMatchObject({
        id: created.id,
        max_in_flight: 25,
        rate_limit: null,
        health: healthy,
        disabled_reason: null,
      });
    }
  });

  test("takes the default from the deployment's configuration", async ({ api, database }) => {
    const configured = await startTestApi(testConfig(database.url, { DEFAULT_MAX_IN_FLIGHT: "3" }));
    try {
      const response = await configured.post(
        "/v1/subscriptions",
        { url: "https://example.com/hooks", events: ["a.b"] },
        201,
        { schema: createdSubscriptionSchema },
      );
      expect(response.body.max_in_flight).toBe(3);
    } finally {
      await configured.close();
    }
  });

  test("accepts max_in_flight and rate_limit on create, at both ends of their ranges", async ({ api, database }) => {
    expect(await create(api, { max_in_flight: 1, rate_limit: 1 })).toMatchObject({ max_in_flight: 1, rate_limit: 1 });
    const high = await create(api, { max_in_flight: 1000, rate_limit: 10_000 });
    expect(high).toMatchObject({ max_in_flight: 1000, rate_limit: 10_000 });
    expect(await row(database, high.id)).toMatchObject({ max_in_flight: 1000, rate_limit: 10_000 });
    expect(await create(api, { rate_limit: null })).toMatchObject({ rate_limit: null });
  });

  test("updates each limit alone, and removes the rate limit with null", async ({ api, database }) => {
    const created = await create(api, { max_in_flight: 5, rate_limit: 20 });
    const capped = await api.put(`/v1/subscriptions/${created.id}`, { max_in_flight: 2 }, 200, {
      schema: subscriptionSchema,
    });
    expect(capped.body).toMatchObject({ max_in_flight: 2, rate_limit: 20 });
    const limited = await api.put(`/v1/subscriptions/${created.id}`, { rate_limit: 7 }, 200, {
      schema: subscriptionSchema,
    });
    expect(limited.body).toMatchObject({ max_in_flight: 2, rate_limit: 7 });
    const untouched = await api.put(`/v1/subscriptions/${created.id}`, { url: "https://example.com/other" }, 200, {
      schema: subscriptionSchema,
    });
    expect(untouched.body).toMatchObject({ max_in_flight: 2, rate_limit: 7 });
    const unlimited = await api.put(`/v1/subscriptions/${created.id}`, { rate_limit: null }, 200, {
      schema: subscriptionSchema,
    });
    expect(unlimited.body).toMatchObject({ max_in_flight: 2, rate_limit: null });
    expect(await row(database, created.id)).toMatchObject({ max_in_flight: 2, rate_limit: null });
    expect((await api.get(`/v1/subscriptions/${created.id}`, 200, { schema: subscriptionSchema })).body).toEqual(
      unlimited.body,
    );
  });

  const badLimits: [Record<string, unknown>, string, string][] = [
    [{ max_in_flight: 0 }, "parameter_out_of_range", "max_in_flight"],
    [{ max_in_flight: 1001 }, "parameter_out_of_range", "max_in_flight"],
    [{ max_in_flight: -1 }, "parameter_out_of_range", "max_in_flight"],
    [{ max_in_flight: 1.5 }, "parameter_invalid", "max_in_flight"],
    [{ max_in_flight: "5" }, "parameter_invalid", "max_in_flight"],
    [{ max_in_flight: null }, "parameter_invalid", "max_in_flight"],
    [{ max_in_flight: true }, "parameter_invalid", "max_in_flight"],
    [{ rate_limit: 0 }, "parameter_out_of_range", "rate_limit"],
    [{ rate_limit: 10_001 }, "parameter_out_of_range", "rate_limit"],
    [{ rate_limit: 2.5 }, "parameter_invalid", "rate_limit"],
    [{ rate_limit: "10" }, "parameter_invalid", "rate_limit"],
    [{ rate_limit: {} }, "parameter_invalid", "rate_limit"],
    [{ rate_limit: [1] }, "parameter_invalid", "rate_limit"],
  ];

  test.for(badLimits)(
    "refuses %j on create with a 400 naming the field",
    async ([body, code, param], { api, database }) => {
      const response = await api.post(
        "/v1/subscriptions",
        { url: "https://example.com/hooks", events: ["a.b"], ...body },
        400,
      );
      expect(response.body.error).toMatchObject({ type: "invalid_request_error", code, param });
      expect(response.body.error.message).toContain(param);
    },
  );

  test.for(badLimits)(
    "refuses %j in PUT with a 400 naming the field, and changes nothing",
    async ([body, code, param], { api, database }) => {
      const created = await create(api, { max_in_flight: 4, rate_limit: 8 });
      const response = await api.put(`/v1/subscriptions/${created.id}`, { active: false, ...body }, 400);
      expect(response.body.error).toMatchObject({ type: "invalid_request_error", code, param });
      expect(
        (await api.get(`/v1/subscriptions/${created.id}`, 200, { schema: subscriptionSchema })).body,
      ).toMatchObject({ active: true, max_in_flight: 4, rate_limit: 8 });
    },
  );

  test("shows a circuit the worker opened, and PUT active:true re-enables and closes it", async ({ api, database }) => {
    const created = await create(api);
    // As the worker leaves a subscription it disabled: failing for days, circuit open, held.
    const [times] = await sql<{ failing_since: Date; last_failure_at: Date; last_success_at: Date; held_until: Date }>(
      database.url,
      `UPDATE subscriptions SET active = false, disabled_reason = 'failing', consecutive_failures = 9,
         failing_since = now() - interval '6 days', last_failure_at = now() - interval '1 minute',
         last_success_at = now() - interval '7 days', circuit_opened_at = now() - interval '1 hour',
         held_until = now() + interval '10 minutes'
       WHERE id = $1 RETURNING failing_since, last_failure_at, last_success_at, held_until`,
      [created.id],
    );
    if (!times) throw new Error("subscription row missing");
    const disabled = await api.get(`/v1/subscriptions/${created.id}`, 200, { schema: subscriptionSchema });
    expect(disabled.body).toMatchObject({
      active: false,
      disabled_reason: "failing",
      health: {
        state: "circuit_open",
        consecutive_failures: 9,
        last_success_at: times.last_success_at.toISOString(),
        last_failure_at: times.last_failure_at.toISOString(),
        retry_at: times.held_until.toISOString(),
      },
    });

    const reenabled = await api.put(`/v1/subscriptions/${created.id}`, { active: true }, 200, {
      schema: subscriptionSchema,
    });
    expect(reenabled.body).toMatchObject({
      active: true,
      disabled_reason: null,
      // A fresh start: the circuit no longer holds attempts, and the failing window begins again
      // (or the next failure would disable it at once); the last success and failure stay on record.
      health: {
        state: "healthy",
        consecutive_failures: 0,
        last_success_at: times.last_success_at.toISOString(),
        last_failure_at: times.last_failure_at.toISOString(),
        retry_at: null,
      },
    });
    expect(await row(database, created.id)).toMatchObject({
      active: true,
      disabled_reason: null,
      circuit_opened_at: null,
      held_until: null,
      consecutive_failures: 0,
      failing_since: null,
    });
  });

  test("closes an open circuit on PUT active:true even when the subscription was not disabled", async ({
    api,
    database,
  }) => {
    const created = await create(api);
    await sql(
      database.url,
      "UPDATE subscriptions SET consecutive_failures = 5, circuit_opened_at = now(), held_until = now() + interval '30 seconds' WHERE id = $1",
      [created.id],
    );
    expect(
      (await api.get(`/v1/subscriptions/${created.id}`, 200, { schema: subscriptionSchema })).body.health.state,
    ).toBe("circuit_open");
    const response = await api.put(`/v1/subscriptions/${created.id}`, { active: true }, 200, {
      schema: subscriptionSchema,
    });
    expect(response.body.health).toMatchObject({ state: "healthy", consecutive_failures: 0, retry_at: null });
    // active:false leaves the health alone.
    await sql(
      database.url,
      "UPDATE subscriptions SET circuit_opened_at = now(), held_until = now() + interval '30 seconds' WHERE id = $1",
      [created.id],
    );
    const paused = await api.put(`/v1/subscriptions/${created.id}`, { active: false }, 200, {
      schema: subscriptionSchema,
    });
    expect(paused.body.health.state).toBe("circuit_open");
  });

  test("describes every new field in the OpenAPI document", async ({ api, database }) => {
    const { schemas } = (await api.call("GET", "/openapi.json", { key: null })).body.components;
    for (const [schema, fields] of [
      ["Subscription", ["max_in_flight", "rate_limit", "disabled_reason"]],
      ["SubscriptionHealth", ["state", "consecutive_failures", "last_success_at", "last_failure_at", "retry_at"]],
      ["CreateSubscription", ["max_in_flight", "rate_limit"]],
      ["UpdateSubscription", ["max_in_flight", "rate_limit"]],
    ] as const) {
      for (const field of fields)
        expect(schemas[schema].properties[field].description, `${schema}.${field}`).toEqual(expect.any(String));
    }
    expect(schemas.CreateSubscription.properties.max_in_flight.description).toContain("DEFAULT_MAX_IN_FLIGHT");
  });

  test("shows a Retry-After hold until it ends, judged at the time of the request", async ({ api, database }) => {
    const created = await create(api);
    const [held] = await sql<{ held_until: Date }>(
      database.url,
      "UPDATE subscriptions SET held_until = now() + interval '1 hour' WHERE id = $1 RETURNING held_until",
      [created.id],
    );
    const during = await api.get(`/v1/subscriptions/${created.id}`, 200, { schema: subscriptionSchema });
    expect(during.body.health).toMatchObject({ state: "circuit_open", retry_at: held?.held_until.toISOString() });
    await sql(database.url, "UPDATE subscriptions SET held_until = now() - interval '1 second' WHERE id = $1", [
      created.id,
    ]);
    const after = await api.get(`/v1/subscriptions/${created.id}`, 200, { schema: subscriptionSchema });
    expect(after.body.health).toEqual(healthy);
  });
});
