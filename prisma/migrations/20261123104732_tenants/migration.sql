-- Tenants (contract §13). The new columns are nullable without a default: adding them rewrites
-- nothing. The per-tenant indexes are partial (tenant_id IS NOT NULL), so an untenanted row gets no
-- entry: without tenants, writes cost what they did (see prisma/schema.prisma).
-- (The partial indexes Prisma re-emits on every migration, which exist already, are left out.)

-- AlterTable
ALTER TABLE "api_keys" ADD COLUMN     "tenant_id" TEXT;

-- AlterTable
ALTER TABLE "deliveries" ADD COLUMN     "tenant_id" TEXT;

-- AlterTable
ALTER TABLE "events" ADD COLUMN     "tenant_id" TEXT;

-- AlterTable
ALTER TABLE "subscriptions" ADD COLUMN     "tenant_id" TEXT;

-- CreateTable
CREATE TABLE "portal_sessions" (
    "id" TEXT NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "token_hash" TEXT NOT NULL,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "api_key_id" TEXT NOT NULL,

    CONSTRAINT "portal_sessions_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "portal_sessions_token_hash_key" ON "portal_sessions"("token_hash");

-- CreateIndex
CREATE INDEX "deliveries_tenant_created_at_id_idx" ON "deliveries"("tenant_id", "created_at" DESC, "id" DESC) WHERE (tenant_id IS NOT NULL);

-- CreateIndex
CREATE INDEX "deliveries_tenant_status_created_at_id_idx" ON "deliveries"("tenant_id", "status", "created_at" DESC, "id" DESC) WHERE (tenant_id IS NOT NULL);

-- CreateIndex
CREATE INDEX "deliveries_tenant_response_code_created_at_id_idx" ON "deliveries"("tenant_id", "response_code", "created_at" DESC, "id" DESC) WHERE (tenant_id IS NOT NULL);

-- CreateIndex
CREATE INDEX "deliveries_tenant_response_2xx_idx" ON "deliveries"("tenant_id", "created_at" DESC, "id" DESC) WHERE (tenant_id IS NOT NULL) AND (response_code >= 200) AND (response_code < 300);

-- CreateIndex
CREATE INDEX "deliveries_tenant_response_3xx_idx" ON "deliveries"("tenant_id", "created_at" DESC, "id" DESC) WHERE (tenant_id IS NOT NULL) AND (response_code >= 300) AND (response_code < 400);

-- CreateIndex
CREATE INDEX "deliveries_tenant_response_4xx_idx" ON "deliveries"("tenant_id", "created_at" DESC, "id" DESC) WHERE (tenant_id IS NOT NULL) AND (response_code >= 400) AND (response_code < 500);

-- CreateIndex
CREATE INDEX "deliveries_tenant_response_5xx_idx" ON "deliveries"("tenant_id", "created_at" DESC, "id" DESC) WHERE (tenant_id IS NOT NULL) AND (response_code >= 500) AND (response_code < 600);

-- CreateIndex
CREATE INDEX "subscriptions_tenant_created_at_id_idx" ON "subscriptions"("tenant_id", "created_at" DESC, "id" DESC) WHERE (tenant_id IS NOT NULL);
