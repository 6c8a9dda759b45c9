-- AlterTable
ALTER TABLE "Transcript" ADD COLUMN     "endsWhenIdle" BOOLEAN NOT NULL DEFAULT false;

-- CreateIndex
CREATE INDEX "Transcript_endsWhenIdle_endedAt_updatedAt_idx" ON "Transcript"("endsWhenIdle", "endedAt", "updatedAt");
