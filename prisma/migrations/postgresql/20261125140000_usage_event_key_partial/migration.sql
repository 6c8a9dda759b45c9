-- Hand-written: the unique index on (projectId, idempotencyKey) holds only the events that have a
-- key. Most events have none (every ingested event sent without an eventID), and a full index gave
-- each of them an entry that no lookup ever reads (NULLs never conflict), which cost the database
-- index upkeep in every batch (docs/performance.md, "ingest5"). The writer's ON CONFLICT names
-- the same predicate (src/analytics/usage-event-writer.ts). The schema's @@unique([projectId,
-- idempotencyKey]) keeps its name and columns; Prisma's schema engine does not compare an index's
-- predicate, so the drift check finds nothing to report (test/db/migrations.test.ts).
DROP INDEX "UsageEvent_projectId_idempotencyKey_key";
CREATE UNIQUE INDEX "UsageEvent_projectId_idempotencyKey_key" ON "UsageEvent"("projectId", "idempotencyKey") WHERE "idempotencyKey" IS NOT NULL;
