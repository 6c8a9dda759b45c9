-- Hand-written: the full-text index of new chunks is written once per statement instead of once per
-- row. The row trigger ran a PL/pgSQL call and a one-row INSERT … ON CONFLICT for each chunk, which
-- cost most of a document's chunk INSERT (docs/performance.md, "Knowledge-base ingestion"); the
-- statement trigger reads the inserted rows from a transition table and indexes them in one
-- INSERT … SELECT, in the same statement and transaction as before, so a chunk is never visible
-- without its index row.
CREATE FUNCTION "kb_chunk_search_insert"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO "kb_chunk_search" ("seq", "tsv")
    SELECT "seq", to_tsvector('english', "content") FROM "kb_chunk_search_new_rows"
    ON CONFLICT ("seq") DO UPDATE SET "tsv" = EXCLUDED."tsv";
    RETURN NULL;
END;
$$;

CREATE TRIGGER "kb_chunk_search_insert" AFTER INSERT ON "KbChunk"
    REFERENCING NEW TABLE AS "kb_chunk_search_new_rows"
    FOR EACH STATEMENT EXECUTE FUNCTION "kb_chunk_search_insert"();

-- A change of a chunk's content keeps the row trigger: PostgreSQL allows no transition table on a
-- trigger limited to a column (UPDATE OF "content"), and a statement trigger on every UPDATE would
-- re-index chunks whose metadata alone changed. Nothing in Parley rewrites a chunk's content; a
-- new upload deletes the chunks and inserts new ones.
DROP TRIGGER "kb_chunk_search_sync" ON "KbChunk";

CREATE TRIGGER "kb_chunk_search_sync" AFTER UPDATE OF "content" ON "KbChunk"
    FOR EACH ROW EXECUTE FUNCTION "kb_chunk_search_sync"();
