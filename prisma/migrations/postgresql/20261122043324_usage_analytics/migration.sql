-- CreateTable
CREATE TABLE "UsageEvent" (
    "id" TEXT NOT NULL,
    "projectId" TEXT NOT NULL,
    "environmentId" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "occurredAt" TIMESTAMP(3) NOT NULL,
    "hour" INTEGER NOT NULL,
    "userId" TEXT,
    "type" TEXT NOT NULL DEFAULT '',
    "model" TEXT NOT NULL DEFAULT '',
    "diagramId" TEXT NOT NULL DEFAULT '',
    "nodeId" TEXT NOT NULL DEFAULT '',
    "subjectId" TEXT NOT NULL DEFAULT '',
    "name" TEXT NOT NULL DEFAULT '',
    "quantity" BIGINT NOT NULL,
    "success" BOOLEAN,
    "idempotencyKey" TEXT,
    "recordedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "UsageEvent_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "UsageRollup" (
    "projectId" TEXT NOT NULL,
    "metric" TEXT NOT NULL,
    "hour" INTEGER NOT NULL,
    "environmentId" TEXT NOT NULL,
    "type" TEXT NOT NULL DEFAULT '',
    "model" TEXT NOT NULL DEFAULT '',
    "diagramId" TEXT NOT NULL DEFAULT '',
    "nodeId" TEXT NOT NULL DEFAULT '',
    "subjectId" TEXT NOT NULL DEFAULT '',
    "name" TEXT NOT NULL DEFAULT '',
    "count" BIGINT NOT NULL,
    "successCount" BIGINT NOT NULL DEFAULT 0,

    CONSTRAINT "UsageRollup_pkey" PRIMARY KEY ("projectId","metric","hour","environmentId","type","model","diagramId","nodeId","subjectId","name")
);

-- CreateTable
CREATE TABLE "UsageHourTotal" (
    "projectId" TEXT NOT NULL,
    "metric" TEXT NOT NULL,
    "hour" INTEGER NOT NULL,
    "environmentId" TEXT NOT NULL,
    "count" BIGINT NOT NULL,
    "successCount" BIGINT NOT NULL DEFAULT 0,

    CONSTRAINT "UsageHourTotal_pkey" PRIMARY KEY ("projectId","metric","hour","environmentId")
);

-- CreateTable
CREATE TABLE "UsageHourUser" (
    "projectId" TEXT NOT NULL,
    "hour" INTEGER NOT NULL,
    "environmentId" TEXT NOT NULL,
    "userId" TEXT NOT NULL,

    CONSTRAINT "UsageHourUser_pkey" PRIMARY KEY ("projectId","hour","environmentId","userId")
);

-- CreateTable
CREATE TABLE "UsageDayIntent" (
    "projectId" TEXT NOT NULL,
    "day" INTEGER NOT NULL,
    "environmentId" TEXT NOT NULL,
    "intent" TEXT NOT NULL,
    "count" BIGINT NOT NULL,

    CONSTRAINT "UsageDayIntent_pkey" PRIMARY KEY ("projectId","day","environmentId","intent")
);

-- CreateIndex
CREATE INDEX "UsageEvent_projectId_kind_hour_idx" ON "UsageEvent"("projectId", "kind", "hour");

-- CreateIndex
CREATE UNIQUE INDEX "UsageEvent_projectId_idempotencyKey_key" ON "UsageEvent"("projectId", "idempotencyKey");

-- AddForeignKey
ALTER TABLE "UsageEvent" ADD CONSTRAINT "UsageEvent_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "UsageRollup" ADD CONSTRAINT "UsageRollup_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "UsageHourTotal" ADD CONSTRAINT "UsageHourTotal_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "UsageHourUser" ADD CONSTRAINT "UsageHourUser_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "UsageDayIntent" ADD CONSTRAINT "UsageDayIntent_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project"("id") ON DELETE CASCADE ON UPDATE CASCADE;
