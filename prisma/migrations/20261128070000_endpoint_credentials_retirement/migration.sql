-- Endpoint credentials a subscription no longer uses are deleted once no delivery refers to them
-- (docs/api.md#retention). Building the index reads the whole deliveries table and makes writes
-- to it wait until the migration commits (docs/operations.md#upgrades).

-- AlterTable
ALTER TABLE "endpoint_credentials" ADD COLUMN     "retired_at" TIMESTAMPTZ(3);

-- Rows no live subscription uses any more: replaced or deleted before this migration.
UPDATE "endpoint_credentials" c SET "retired_at" = CURRENT_TIMESTAMP
WHERE NOT EXISTS (
  SELECT 1 FROM "subscriptions" s WHERE s."credentials_id" = c."id" AND s."deleted_at" IS NULL
);

-- CreateIndex
CREATE INDEX "deliveries_credentials_id_idx" ON "deliveries"("credentials_id") WHERE ("credentials_id" IS NOT NULL);
