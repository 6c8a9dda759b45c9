-- CreateTable
CREATE TABLE "KbTag" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "projectId" TEXT NOT NULL,
    "label" TEXT NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    CONSTRAINT "KbTag_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "KbDocumentTag" (
    "documentId" TEXT NOT NULL,
    "tagId" TEXT NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,

    PRIMARY KEY ("documentId", "tagId"),
    CONSTRAINT "KbDocumentTag_documentId_fkey" FOREIGN KEY ("documentId") REFERENCES "KbDocument" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "KbDocumentTag_tagId_fkey" FOREIGN KEY ("tagId") REFERENCES "KbTag" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateIndex
CREATE UNIQUE INDEX "KbTag_projectId_label_key" ON "KbTag"("projectId", "label");

-- CreateIndex
CREATE INDEX "KbDocumentTag_tagId_idx" ON "KbDocumentTag"("tagId");
