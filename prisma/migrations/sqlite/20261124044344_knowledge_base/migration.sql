-- CreateTable
CREATE TABLE "KbDocument" (
    "id" TEXT NOT NULL PRIMARY KEY,
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
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    CONSTRAINT "KbDocument_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "KbDocumentSource" (
    "documentId" TEXT NOT NULL PRIMARY KEY,
    "revision" INTEGER NOT NULL,
    "bytes" BLOB,
    "filename" TEXT,
    "contentType" TEXT,
    "table" JSONB,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "KbDocumentSource_documentId_fkey" FOREIGN KEY ("documentId") REFERENCES "KbDocument" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "KbChunk" (
    "seq" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "id" TEXT NOT NULL,
    "documentId" TEXT NOT NULL,
    "projectId" TEXT NOT NULL,
    "position" INTEGER NOT NULL,
    "content" TEXT NOT NULL,
    "tokens" INTEGER NOT NULL,
    "metadata" JSONB NOT NULL,
    "rowMetadata" JSONB,
    CONSTRAINT "KbChunk_documentId_fkey" FOREIGN KEY ("documentId") REFERENCES "KbDocument" ("id") ON DELETE CASCADE ON UPDATE CASCADE
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

-- Hand-written (Prisma cannot model these; listed in externalTables, src/db/migrate.ts).

-- Full-text index over chunk content: an external-content FTS5 table (it stores only the index;
-- the text stays in KbChunk), keyed by KbChunk.seq and kept in sync by triggers.
CREATE VIRTUAL TABLE "kb_chunk_fts" USING fts5(
    content,
    content='KbChunk',
    content_rowid='seq',
    tokenize='porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER "kb_chunk_fts_insert" AFTER INSERT ON "KbChunk" BEGIN
    INSERT INTO "kb_chunk_fts"(rowid, content) VALUES (new."seq", new."content");
END;

CREATE TRIGGER "kb_chunk_fts_delete" AFTER DELETE ON "KbChunk" BEGIN
    INSERT INTO "kb_chunk_fts"("kb_chunk_fts", rowid, content) VALUES ('delete', old."seq", old."content");
END;

CREATE TRIGGER "kb_chunk_fts_update" AFTER UPDATE OF "content" ON "KbChunk" BEGIN
    INSERT INTO "kb_chunk_fts"("kb_chunk_fts", rowid, content) VALUES ('delete', old."seq", old."content");
    INSERT INTO "kb_chunk_fts"(rowid, content) VALUES (new."seq", new."content");
END;

-- One embedding per chunk, for the configured embedding model: little-endian float32 values,
-- compared with sqlite-vec's vec_distance_cosine.
CREATE TABLE "kb_chunk_embedding" (
    "seq" INTEGER NOT NULL PRIMARY KEY REFERENCES "KbChunk" ("seq") ON DELETE CASCADE,
    "model" TEXT NOT NULL,
    "dims" INTEGER NOT NULL,
    "embedding" BLOB NOT NULL
);

CREATE INDEX "kb_chunk_embedding_model_idx" ON "kb_chunk_embedding" ("model");
