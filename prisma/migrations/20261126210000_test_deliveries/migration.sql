-- Test deliveries (POST /v1/subscriptions/{id}/test) are told apart from the others, so that one
-- goes out while the service has its subscription disabled (packages/db/src/delivery-leases.ts).
-- A constant default: PostgreSQL adds the column without rewriting the table.

-- AlterTable
ALTER TABLE "deliveries" ADD COLUMN     "test" BOOLEAN NOT NULL DEFAULT false;
