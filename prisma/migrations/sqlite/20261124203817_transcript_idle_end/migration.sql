-- AlterTable (written by hand: Prisma's differ would copy the whole table to add one column with a
-- default, which SQLite's ADD COLUMN does in place)
ALTER TABLE "Transcript" ADD COLUMN "endsWhenIdle" BOOLEAN NOT NULL DEFAULT false;

-- CreateIndex
CREATE INDEX "Transcript_endsWhenIdle_endedAt_updatedAt_idx" ON "Transcript"("endsWhenIdle", "endedAt", "updatedAt");
