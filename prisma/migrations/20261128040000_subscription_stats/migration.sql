-- Subscription stats (docs/api.md#subscription-stats) read a subscription's attempts of a time
-- window from one index: each attempt now carries its delivery's subscription, and whether it
-- timed out (before this, only its error's words said so). Filling both rewrites every row of
-- delivery_attempts, with writes to it blocked meanwhile (docs/operations.md#upgrades).

-- AlterTable
ALTER TABLE "delivery_attempts" ADD COLUMN     "subscription_id" TEXT,
ADD COLUMN     "timed_out" BOOLEAN NOT NULL DEFAULT false;

-- The errors the worker has written for an attempt whose time ran out.
UPDATE "delivery_attempts" a SET "subscription_id" = d."subscription_id",
  "timed_out" = a."response_code" IS NULL AND (a."error" = 'connect timeout' OR a."error" LIKE 'timeout after %'
                                               OR a."error" LIKE 'OAuth2 token request failed: timeout after %')
FROM "deliveries" d
WHERE d."id" = a."delivery_id";

-- An attempt whose delivery is gone is out of every read already (they are read by delivery).
DELETE FROM "delivery_attempts" WHERE "subscription_id" IS NULL;

ALTER TABLE "delivery_attempts" ALTER COLUMN "subscription_id" SET NOT NULL;

-- CreateIndex
CREATE INDEX "delivery_attempts_subscription_stats_idx" ON "delivery_attempts"("subscription_id", "started_at", "response_code", "duration_ms", "timed_out");
