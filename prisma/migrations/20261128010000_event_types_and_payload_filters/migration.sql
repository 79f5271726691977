-- Payload filters: the filter as the client sent it, and its jsonpath form, which the publish
-- statement evaluates (packages/core/src/payload-filter-jsonpath.ts). Nullable columns without a
-- default: PostgreSQL adds them without rewriting the table.

-- AlterTable
ALTER TABLE "subscriptions" ADD COLUMN     "filter" JSONB,
ADD COLUMN     "filter_path" jsonpath;

-- The event-type catalog. Its list is ordered by name byte by byte, whatever the database's
-- collation, so that a page's cursor means the same thing on every deployment.

-- CreateTable
CREATE TABLE "event_types" (
    "name" TEXT COLLATE "C" NOT NULL,
    "description" TEXT NOT NULL DEFAULT '',
    "schema" JSONB,
    "examples" JSONB NOT NULL DEFAULT '[]',
    "deprecated" BOOLEAN NOT NULL DEFAULT false,
    "archived" BOOLEAN NOT NULL DEFAULT false,
    "revision" INTEGER NOT NULL DEFAULT 1,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "event_types_pkey" PRIMARY KEY ("name")
);
