-- The end of the last Retry-After an endpoint asked for, apart from held_until, which may be later
-- (an open circuit's next probe): a resend, a recover or a test brings the probe forward, but never
-- before the end of a Retry-After (packages/core/src/endpoint-health.ts, explicitProbeAt).
-- Nullable without a default: PostgreSQL adds the column without rewriting the table.

-- AlterTable
ALTER TABLE "subscriptions" ADD COLUMN     "retry_after_until" TIMESTAMPTZ(3);

-- A hold while the circuit is closed can only be a Retry-After.
UPDATE "subscriptions" SET "retry_after_until" = "held_until"
WHERE "circuit_opened_at" IS NULL AND "held_until" > now();
