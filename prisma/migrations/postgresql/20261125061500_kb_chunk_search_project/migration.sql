-- Hand-written: the full-text index rows carry their chunk's project, so a query with no metadata
-- or tag filter ranks its matches in "kb_chunk_search" alone and reads only the chunks it returns
-- from "KbChunk", instead of fetching every matching chunk's row to check its project before
-- ranking (src/kb/search.ts; docs/performance.md). A chunk never changes project; the triggers
-- copy the column all the same if its content or project is ever rewritten.
ALTER TABLE "kb_chunk_search" ADD COLUMN "projectId" TEXT;

UPDATE "kb_chunk_search" AS s SET "projectId" = c."projectId" FROM "KbChunk" AS c WHERE c."seq" = s."seq";

ALTER TABLE "kb_chunk_search" ALTER COLUMN "projectId" SET NOT NULL;

CREATE OR REPLACE FUNCTION "kb_chunk_search_insert"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO "kb_chunk_search" ("seq", "projectId", "tsv")
    SELECT "seq", "projectId", to_tsvector('english', "content") FROM "kb_chunk_search_new_rows"
    ON CONFLICT ("seq") DO UPDATE SET "projectId" = EXCLUDED."projectId", "tsv" = EXCLUDED."tsv";
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION "kb_chunk_search_sync"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO "kb_chunk_search" ("seq", "projectId", "tsv")
    VALUES (NEW."seq", NEW."projectId", to_tsvector('english', NEW."content"))
    ON CONFLICT ("seq") DO UPDATE SET "projectId" = EXCLUDED."projectId", "tsv" = EXCLUDED."tsv";
    RETURN NULL;
END;
$$;

DROP TRIGGER "kb_chunk_search_sync" ON "KbChunk";

CREATE TRIGGER "kb_chunk_search_sync" AFTER UPDATE OF "content", "projectId" ON "KbChunk"
    FOR EACH ROW EXECUTE FUNCTION "kb_chunk_search_sync"();
