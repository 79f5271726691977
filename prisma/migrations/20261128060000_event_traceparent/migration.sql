-- The traceparent of the publishing request, for the trace of its deliveries (docs/operations.md#tracing).
-- A nullable column without a default: no table rewrite.
ALTER TABLE "events" ADD COLUMN "traceparent" TEXT;
