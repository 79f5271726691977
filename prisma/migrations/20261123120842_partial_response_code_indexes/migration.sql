-- The exact response_code indexes become partial (response_code IS NOT NULL): a delivery is
-- inserted queued, without a response code, so inserting one (a big fan-out writes thousands in
-- one statement) writes no entry in them. An exact-code filter (response_code = N) implies the
-- predicate, so the list queries use them as before.
-- (The partial indexes Prisma re-emits on every migration, which exist already, are left out.)

-- DropIndex
DROP INDEX "deliveries_response_code_created_at_id_idx";

-- DropIndex
DROP INDEX "deliveries_subscription_id_response_code_created_at_id_idx";

-- CreateIndex
CREATE INDEX "deliveries_response_code_created_at_id_idx" ON "deliveries"("response_code", "created_at" DESC, "id" DESC) WHERE (response_code IS NOT NULL);

-- CreateIndex
CREATE INDEX "deliveries_subscription_id_response_code_created_at_id_idx" ON "deliveries"("subscription_id", "response_code", "created_at" DESC, "id" DESC) WHERE (response_code IS NOT NULL);
