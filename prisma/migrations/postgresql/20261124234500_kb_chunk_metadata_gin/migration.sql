-- Hand-written: a GIN index over chunk metadata (jsonb_path_ops), which serves the `@>` containment
-- tests the metadata filter compiles equality to (src/kb/filter/sql.ts), so a selective filter finds
-- its chunks through the index before any ranking. Prisma cannot declare it in the schema shared with
-- SQLite; src/db/migrate.ts lists it in `migrationOnlyIndexes`, so the drift check expects it.
CREATE INDEX "KbChunk_metadata_gin_idx" ON "KbChunk" USING GIN ("metadata" jsonb_path_ops);
