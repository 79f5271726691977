-- Endpoint authentication and signature schemes (docs/api.md#endpoint-authentication,
-- docs/api.md#signature-schemes). Every column is nullable or has a constant default, so adding
-- them rewrites no table.

-- AlterTable
ALTER TABLE "deliveries" ADD COLUMN     "credentials_id" TEXT;

-- AlterTable
ALTER TABLE "subscriptions" ADD COLUMN     "auth" JSONB,
ADD COLUMN     "client_certificate" JSONB,
ADD COLUMN     "credentials_id" TEXT,
ADD COLUMN     "public_key" TEXT,
ADD COLUMN     "signature_scheme" TEXT NOT NULL DEFAULT 'hmac-sha256';

-- CreateTable
CREATE TABLE "endpoint_credentials" (
    "id" TEXT NOT NULL,
    "ciphertext" BYTEA NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "endpoint_credentials_pkey" PRIMARY KEY ("id")
);
