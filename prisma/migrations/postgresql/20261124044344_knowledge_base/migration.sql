-- CreateTable
CREATE TABLE "KbDocument" (
    "id" TEXT NOT NULL,
    "projectId" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "url" TEXT,
    "metadata" JSONB NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'PENDING',
    "statusDetail" TEXT,
    "maxChunkSize" INTEGER NOT NULL DEFAULT 1000,
    "rowsCount" INTEGER,
    "chunkCount" INTEGER NOT NULL DEFAULT 0,
    "revision" INTEGER NOT NULL DEFAULT 1,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "KbDocument_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "KbDocumentSource" (
    "documentId" TEXT NOT NULL,
    "revision" INTEGER NOT NULL,
    "bytes" BYTEA,
    "filename" TEXT,
    "contentType" TEXT,
    "table" JSONB,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "KbDocumentSource_pkey" PRIMARY KEY ("documentId")
);

-- CreateTable
CREATE TABLE "KbChunk" (
    "seq" SERIAL NOT NULL,
    "id" TEXT NOT NULL,
    "documentId" TEXT NOT NULL,
    "projectId" TEXT NOT NULL,
    "position" INTEGER NOT NULL,
    "content" TEXT NOT NULL,
    "tokens" INTEGER NOT NULL,
    "metadata" JSONB NOT NULL,
    "rowMetadata" JSONB,

    CONSTRAINT "KbChunk_pkey" PRIMARY KEY ("seq")
);

-- CreateIndex
CREATE INDEX "KbDocument_projectId_createdAt_id_idx" ON "KbDocument"("projectId", "createdAt", "id");

-- CreateIndex
CREATE INDEX "KbDocument_projectId_name_idx" ON "KbDocument"("projectId", "name");

-- CreateIndex
CREATE UNIQUE INDEX "KbChunk_id_key" ON "KbChunk"("id");

-- CreateIndex
CREATE INDEX "KbChunk_documentId_position_idx" ON "KbChunk"("documentId", "position");

-- CreateIndex
CREATE INDEX "KbChunk_projectId_idx" ON "KbChunk"("projectId");

-- AddForeignKey
ALTER TABLE "KbDocument" ADD CONSTRAINT "KbDocument_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "KbDocumentSource" ADD CONSTRAINT "KbDocumentSource_documentId_fkey" FOREIGN KEY ("documentId") REFERENCES "KbDocument"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "KbChunk" ADD CONSTRAINT "KbChunk_documentId_fkey" FOREIGN KEY ("documentId") REFERENCES "KbDocument"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Hand-written (Prisma cannot model these; listed in externalTables, src/db/migrate.ts).

-- Full-text index over chunk content: a tsvector per chunk with a GIN index, kept in sync with
-- KbChunk by a trigger (the English configuration stems like SQLite's porter tokenizer).
CREATE TABLE "kb_chunk_search" (
    "seq" INTEGER NOT NULL PRIMARY KEY REFERENCES "KbChunk" ("seq") ON DELETE CASCADE,
    "tsv" TSVECTOR NOT NULL
);

CREATE INDEX "kb_chunk_search_tsv_idx" ON "kb_chunk_search" USING GIN ("tsv");

CREATE FUNCTION "kb_chunk_search_sync"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO "kb_chunk_search" ("seq", "tsv") VALUES (NEW."seq", to_tsvector('english', NEW."content"))
    ON CONFLICT ("seq") DO UPDATE SET "tsv" = EXCLUDED."tsv";
    RETURN NULL;
END;
$$;

CREATE TRIGGER "kb_chunk_search_sync" AFTER INSERT OR UPDATE OF "content" ON "KbChunk"
    FOR EACH ROW EXECUTE FUNCTION "kb_chunk_search_sync"();

-- One embedding per chunk, for the configured embedding model, with its Euclidean norm so that
-- cosine similarity is one dot product (pgvector, when installed, reads the same array).
CREATE TABLE "kb_chunk_embedding" (
    "seq" INTEGER NOT NULL PRIMARY KEY REFERENCES "KbChunk" ("seq") ON DELETE CASCADE,
    "model" TEXT NOT NULL,
    "dims" INTEGER NOT NULL,
    "embedding" REAL[] NOT NULL,
    "norm" REAL NOT NULL
);

CREATE INDEX "kb_chunk_embedding_model_idx" ON "kb_chunk_embedding" ("model");
