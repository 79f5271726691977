-- AlterTable
ALTER TABLE "deliveries" ADD COLUMN     "headers" JSONB NOT NULL DEFAULT '{}';

-- AlterTable
ALTER TABLE "subscriptions" ADD COLUMN     "headers" JSONB NOT NULL DEFAULT '{}',
ADD COLUMN     "previous_secret_expires_at" TIMESTAMPTZ(3),
ADD COLUMN     "previous_secret_id" TEXT;

-- CreateIndex
CREATE INDEX "deliveries_response_code_created_at_id_idx" ON "deliveries"("response_code", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "deliveries_subscription_id_response_code_created_at_id_idx" ON "deliveries"("subscription_id", "response_code", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "deliveries_response_2xx_idx" ON "deliveries"("created_at" DESC, "id" DESC) WHERE (response_code >= 200 AND response_code < 300);

-- CreateIndex
CREATE INDEX "deliveries_response_3xx_idx" ON "deliveries"("created_at" DESC, "id" DESC) WHERE (response_code >= 300 AND response_code < 400);

-- CreateIndex
CREATE INDEX "deliveries_response_4xx_idx" ON "deliveries"("created_at" DESC, "id" DESC) WHERE (response_code >= 400 AND response_code < 500);

-- CreateIndex
CREATE INDEX "deliveries_response_5xx_idx" ON "deliveries"("created_at" DESC, "id" DESC) WHERE (response_code >= 500 AND response_code < 600);

-- CreateIndex
CREATE INDEX "deliveries_subscription_response_2xx_idx" ON "deliveries"("subscription_id", "created_at" DESC, "id" DESC) WHERE (response_code >= 200 AND response_code < 300);

-- CreateIndex
CREATE INDEX "deliveries_subscription_response_3xx_idx" ON "deliveries"("subscription_id", "created_at" DESC, "id" DESC) WHERE (response_code >= 300 AND response_code < 400);

-- CreateIndex
CREATE INDEX "deliveries_subscription_response_4xx_idx" ON "deliveries"("subscription_id", "created_at" DESC, "id" DESC) WHERE (response_code >= 400 AND response_code < 500);

-- CreateIndex
CREATE INDEX "deliveries_subscription_response_5xx_idx" ON "deliveries"("subscription_id", "created_at" DESC, "id" DESC) WHERE (response_code >= 500 AND response_code < 600);

-- AddForeignKey
ALTER TABLE "subscriptions" ADD CONSTRAINT "subscriptions_previous_secret_id_fkey" FOREIGN KEY ("previous_secret_id") REFERENCES "signing_secrets"("id") ON DELETE SET NULL ON UPDATE CASCADE;
