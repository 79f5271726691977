-- The attempt in flight moves from a row of delivery_attempts, inserted at the claim and updated
-- at the record, to two columns of its delivery: an attempt now writes delivery_attempts once,
-- when it ends (packages/db/src/delivery-leases.ts).

-- AlterTable
ALTER TABLE "deliveries" ADD COLUMN     "open_attempt_id" TEXT,
ADD COLUMN     "open_attempt_started_at" TIMESTAMPTZ(3);

-- Attempts open at upgrade time (in flight, or left by a worker that died) move onto their delivery.
UPDATE "deliveries" d SET "open_attempt_id" = a."id", "open_attempt_started_at" = a."started_at"
FROM "delivery_attempts" a
WHERE d."attempt_open" AND a."delivery_id" = d."id" AND a."number" = d."attempts";

DELETE FROM "delivery_attempts" a
USING "deliveries" d
WHERE a."delivery_id" = d."id" AND a."id" = d."open_attempt_id";

-- AlterTable
ALTER TABLE "deliveries" DROP COLUMN "attempt_open";

-- The attempt log as the API lists it (contract §5): the attempts that ended, and the one in
-- flight. Read with a delivery_id condition, which PostgreSQL applies inside both branches (the
-- second becomes a lookup by primary key).
CREATE VIEW "delivery_attempt_log" AS
  SELECT "id", "delivery_id", "number", "url", "started_at", "duration_ms", "response_code", "response_body", "error"
  FROM "delivery_attempts"
  UNION ALL
  SELECT "open_attempt_id", "id", "attempts", "url", "open_attempt_started_at", NULL, NULL, NULL, NULL
  FROM "deliveries"
  WHERE "open_attempt_id" IS NOT NULL;
