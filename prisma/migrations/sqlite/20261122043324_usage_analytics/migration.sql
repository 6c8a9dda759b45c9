-- CreateTable
CREATE TABLE "UsageEvent" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "projectId" TEXT NOT NULL,
    "environmentId" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "occurredAt" DATETIME NOT NULL,
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
    "recordedAt" DATETIME NOT NULL,
    CONSTRAINT "UsageEvent_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project" ("id") ON DELETE CASCADE ON UPDATE CASCADE
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

    PRIMARY KEY ("projectId", "metric", "hour", "environmentId", "type", "model", "diagramId", "nodeId", "subjectId", "name"),
    CONSTRAINT "UsageRollup_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "UsageHourTotal" (
    "projectId" TEXT NOT NULL,
    "metric" TEXT NOT NULL,
    "hour" INTEGER NOT NULL,
    "environmentId" TEXT NOT NULL,
    "count" BIGINT NOT NULL,
    "successCount" BIGINT NOT NULL DEFAULT 0,

    PRIMARY KEY ("projectId", "metric", "hour", "environmentId"),
    CONSTRAINT "UsageHourTotal_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "UsageHourUser" (
    "projectId" TEXT NOT NULL,
    "hour" INTEGER NOT NULL,
    "environmentId" TEXT NOT NULL,
    "userId" TEXT NOT NULL,

    PRIMARY KEY ("projectId", "hour", "environmentId", "userId"),
    CONSTRAINT "UsageHourUser_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "UsageDayIntent" (
    "projectId" TEXT NOT NULL,
    "day" INTEGER NOT NULL,
    "environmentId" TEXT NOT NULL,
    "intent" TEXT NOT NULL,
    "count" BIGINT NOT NULL,

    PRIMARY KEY ("projectId", "day", "environmentId", "intent"),
    CONSTRAINT "UsageDayIntent_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateIndex
CREATE INDEX "UsageEvent_projectId_kind_hour_idx" ON "UsageEvent"("projectId", "kind", "hour");

-- CreateIndex
CREATE UNIQUE INDEX "UsageEvent_projectId_idempotencyKey_key" ON "UsageEvent"("projectId", "idempotencyKey");
