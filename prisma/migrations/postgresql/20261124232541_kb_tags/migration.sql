-- CreateTable
CREATE TABLE "KbTag" (
    "id" TEXT NOT NULL,
    "projectId" TEXT NOT NULL,
    "label" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "KbTag_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "KbDocumentTag" (
    "documentId" TEXT NOT NULL,
    "tagId" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "KbDocumentTag_pkey" PRIMARY KEY ("documentId","tagId")
);

-- CreateIndex
CREATE UNIQUE INDEX "KbTag_projectId_label_key" ON "KbTag"("projectId", "label");

-- CreateIndex
CREATE INDEX "KbDocumentTag_tagId_idx" ON "KbDocumentTag"("tagId");

-- AddForeignKey
ALTER TABLE "KbTag" ADD CONSTRAINT "KbTag_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "KbDocumentTag" ADD CONSTRAINT "KbDocumentTag_documentId_fkey" FOREIGN KEY ("documentId") REFERENCES "KbDocument"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "KbDocumentTag" ADD CONSTRAINT "KbDocumentTag_tagId_fkey" FOREIGN KEY ("tagId") REFERENCES "KbTag"("id") ON DELETE CASCADE ON UPDATE CASCADE;
