-- AlterTable
ALTER TABLE "Transcript" ADD COLUMN "browser" TEXT;
ALTER TABLE "Transcript" ADD COLUMN "device" TEXT;
ALTER TABLE "Transcript" ADD COLUMN "os" TEXT;
ALTER TABLE "Transcript" ADD COLUMN "userImage" TEXT;
ALTER TABLE "Transcript" ADD COLUMN "userName" TEXT;

-- CreateTable
CREATE TABLE "TranscriptFeedback" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "transcriptId" TEXT NOT NULL,
    "projectId" TEXT NOT NULL,
    "environmentId" TEXT NOT NULL,
    "turnId" TEXT NOT NULL,
    "rating" TEXT NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    CONSTRAINT "TranscriptFeedback_transcriptId_fkey" FOREIGN KEY ("transcriptId") REFERENCES "Transcript" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateIndex
CREATE INDEX "TranscriptFeedback_projectId_environmentId_createdAt_idx" ON "TranscriptFeedback"("projectId", "environmentId", "createdAt");

-- CreateIndex
CREATE UNIQUE INDEX "TranscriptFeedback_transcriptId_turnId_key" ON "TranscriptFeedback"("transcriptId", "turnId");
