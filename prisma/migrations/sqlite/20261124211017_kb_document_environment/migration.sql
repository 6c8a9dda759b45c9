-- AlterTable
ALTER TABLE "KbDocument" ADD COLUMN "environmentId" TEXT;
