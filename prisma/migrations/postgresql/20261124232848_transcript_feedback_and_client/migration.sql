-- AlterTable
ALTER TABLE "Transcript" ADD COLUMN     "browser" TEXT,
ADD COLUMN     "device" TEXT,
ADD COLUMN     "os" TEXT,
ADD COLUMN     "userImage" TEXT,
ADD COLUMN     "userName" TEXT;

-- CreateTable
CREATE TABLE "TranscriptFeedback" (
    "id" TEXT NOT NULL,
    "transcriptId" TEXT NOT NULL,
    "projectId" TEXT NOT NULL,
    "environmentId" TEXT NOT NULL,
    "turnId" TEXT NOT NULL,
    "rating" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "TranscriptFeedback_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "TranscriptFeedback_projectId_environmentId_createdAt_idx" ON "TranscriptFeedback"("projectId", "environmentId", "createdAt");

-- CreateIndex
CREATE UNIQUE INDEX "TranscriptFeedback_transcriptId_turnId_key" ON "TranscriptFeedback"("transcriptId", "turnId");

-- AddForeignKey
ALTER TABLE "TranscriptFeedback" ADD CONSTRAINT "TranscriptFeedback_transcriptId_fkey" FOREIGN KEY ("transcriptId") REFERENCES "Transcript"("id") ON DELETE CASCADE ON UPDATE CASCADE;
