import {
  type AttemptResult,
  applyAttempt,
  type EndpointHealth,
  explicitProbeAt,
  type HealthChange,
  type HealthRules,
  type OperationalEventType,
  operationalEventTypes,
} from "@webhooks/core";
import { type PublishInput, publishEvents } from "./events.ts";
import type { SqlClient } from "./sql.ts";

/** One finished attempt, as the endpoint's health sees it. */
export interface EndpointResult {
  subscriptionId: string;
  result: AttemptResult & { error: string | null };
  finishedAt: Date;
}

export interface HealthUpdate {
  subscriptionId: string;
  health: EndpointHealth;
  changes: HealthChange[];
}

/** The health columns of `subscriptions`, by the EndpointHealth field each fills. */
const HEALTH_COLUMNS: Record<keyof EndpointHealth, string> = {
  consecutiveFailures: "consecutive_failures",
  failingSince: "failing_since",
  lastSuccessAt: "last_success_at",
  lastFailureAt: "last_failure_at",
  circuitOpenedAt: "circuit_opened_at",
  heldUntil: "held_until",
  retryAfterUntil: "retry_after_until",
  disabledReason: "disabled_reason",
  active: "active",
};

/** The health columns of `table` (a subscriptions row), aliased to EndpointHealth's fields (sql.ts's rule). */
export function healthColumns(table: string): string {
  return Object.entries(HEALTH_COLUMNS)
    .map(([field, column]) => `${table}.${column} AS "${field}"`)
    .join(", ");
}

/** The health fields of a row that selected `healthColumns`, without its other columns. */
export function healthFromRow(row: EndpointHealth): EndpointHealth {
  const {
    consecutiveFailures,
    failingSince,
    lastSuccessAt,
    lastFailureAt,
    circuitOpenedAt,
    heldUntil,
    retryAfterUntil,
    disabledReason,
    active,
  } = row;
  return {
    consecutiveFailures,
    failingSince,
    lastSuccessAt,
    lastFailureAt,
    circuitOpenedAt,
    heldUntil,
    retryAfterUntil,
    disabledReason,
    active,
  };
}

const eventTypeOf: Record<HealthChange, OperationalEventType> = {
  circuit_opened: operationalEventTypes.circuitOpened,
  circuit_closed: operationalEventTypes.circuitClosed,
  disabled: operationalEventTypes.subscriptionDisabled,
};

/**
 * Applies finished attempts to their subscriptions' health (core's endpoint-health rules) and
 * publishes the operational events their changes call for, in one transaction: the health and
 * the event that announces it are committed together or not at all. The rows are locked in id
 * order, so concurrent workers serialise per subscription without deadlocking, and with FOR NO
 * KEY UPDATE, the weakest lock that serialises them: the health columns are not a key.
 *
 * Returns the updates and the operational deliveries, which the caller enqueues after commit.
 */
export async function recordEndpointResults(
  ctx: { sql: SqlClient },
  results: EndpointResult[],
  rules: HealthRules,
): Promise<{ updates: HealthUpdate[]; deliveryIds: string[] }> {
  if (results.length === 0) return { updates: [], deliveryIds: [] };
  return ctx.sql.transaction(async (sql) => {
    const ids = [...new Set(results.map((r) => r.subscriptionId))].sort();
    const rows = await sql.query<EndpointHealth & { id: string; tenantId: string | null }>(
      `SELECT id, tenant_id AS "tenantId", ${healthColumns("subscriptions")} FROM subscriptions WHERE id = ANY($1::text[]) ORDER BY id FOR NO KEY UPDATE`,
      [ids],
    );
    const updates = new Map<string, HealthUpdate>(
      rows.map((row) => [row.id, { subscriptionId: row.id, health: healthFromRow(row), changes: [] }]),
    );
    const tenantOf = new Map(rows.map((row) => [row.id, row.tenantId]));
    // docs/api.md#operational-events: operational events go through the normal pipeline, to
    // subscriptions that name them.
    const events: PublishInput[] = [];
    for (const result of results) {
      const update = updates.get(result.subscriptionId);
      if (!update) continue;
      const applied = applyAttempt(update.health, result.result, result.finishedAt, rules);
      update.health = applied.health;
      update.changes.push(...applied.changes);
      for (const change of applied.changes)
        events.push(operationalEvent(change, update.health, result, tenantOf.get(result.subscriptionId) ?? null));
    }

    const all = [...updates.values()];
    await sql.query(
      `UPDATE subscriptions s SET
         consecutive_failures = u.consecutive_failures, failing_since = u.failing_since, last_success_at = u.last_success_at,
         last_failure_at = u.last_failure_at, circuit_opened_at = u.circuit_opened_at, held_until = u.held_until,
         retry_after_until = u.retry_after_until, disabled_reason = u.disabled_reason, active = u.active, updated_at = now()
       FROM unnest($1::text[], $2::int[], $3::timestamptz[], $4::timestamptz[], $5::timestamptz[], $6::timestamptz[], $7::timestamptz[], $8::text[], $9::bool[], $10::timestamptz[])
         AS u(id, consecutive_failures, failing_since, last_success_at, last_failure_at, circuit_opened_at, held_until, disabled_reason, active, retry_after_until)
       WHERE s.id = u.id`,
      [
        all.map((u) => u.subscriptionId),
        all.map((u) => u.health.consecutiveFailures),
        all.map((u) => u.health.failingSince?.toISOString() ?? null),
        all.map((u) => u.health.lastSuccessAt?.toISOString() ?? null),
        all.map((u) => u.health.lastFailureAt?.toISOString() ?? null),
        all.map((u) => u.health.circuitOpenedAt?.toISOString() ?? null),
        all.map((u) => u.health.heldUntil?.toISOString() ?? null),
        all.map((u) => u.health.disabledReason),
        all.map((u) => u.health.active),
        all.map((u) => u.health.retryAfterUntil?.toISOString() ?? null),
      ],
    );

    const published = events.length > 0 ? await publishEvents({ sql }, events) : [];
    const deliveryIds = published.flatMap((result) => (result instanceof Error ? [] : result.deliveryIds));
    return { updates: all, deliveryIds };
  });
}

/**
 * An explicit action (a manual resend, a recover, a test event) on a subscription whose circuit
 * is open brings its next probe forward (core's `explicitProbeAt`). Returns when that probe may
 * go, or null while the circuit is closed: the caller then has the gate let the action's
 * delivery go as the probe. The row is locked as the workers' health writes lock it, so that one
 * recorded meanwhile is not overwritten.
 */
export async function bringProbeForward(ctx: { sql: SqlClient }, subscriptionId: string): Promise<Date | null> {
  return ctx.sql.transaction(async (sql) => {
    const [row] = await sql.query<EndpointHealth & { now: Date }>(
      `SELECT ${healthColumns("subscriptions")}, now() AS now FROM subscriptions WHERE id = $1 FOR NO KEY UPDATE`,
      [subscriptionId],
    );
    const probeAt = row ? explicitProbeAt(healthFromRow(row), row.now) : null;
    if (!row || probeAt === null) return null;
    if (row.heldUntil === null || row.heldUntil > probeAt)
      await sql.query("UPDATE subscriptions SET held_until = $2, updated_at = now() WHERE id = $1", [
        subscriptionId,
        probeAt,
      ]);
    return probeAt;
  });
}

/**
 * Operational events are the operator's, not a tenant's (docs/api.md#operational-events): they are
 * published without a tenant, so they reach only untenanted subscriptions that name them, even when
 * the subscription they are about belongs to a tenant; `data.tenant_id` then says which one.
 */
function operationalEvent(
  change: HealthChange,
  health: EndpointHealth,
  cause: EndpointResult,
  tenantId: string | null,
): PublishInput {
  return {
    type: eventTypeOf[change],
    data: {
      subscription_id: cause.subscriptionId,
      ...(tenantId === null ? {} : { tenant_id: tenantId }),
      reason: reasonOf(change, health),
      response_code: cause.result.responseCode,
      error: cause.result.error,
    },
  };
}

function reasonOf(change: HealthChange, health: EndpointHealth): string {
  switch (change) {
    case "disabled":
      return health.disabledReason ?? "failing";
    case "circuit_opened":
      return "consecutive_failures";
    case "circuit_closed":
      return "probe_succeeded";
  }
}
