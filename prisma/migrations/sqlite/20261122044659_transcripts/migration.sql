-- CreateTable
CREATE TABLE "Transcript" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "projectId" TEXT NOT NULL,
    "environmentId" TEXT NOT NULL,
    "sessionId" TEXT NOT NULL,
    "userId" TEXT,
    "logCount" INTEGER NOT NULL DEFAULT 0,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    "endedAt" DATETIME,
    "expiresAt" DATETIME,
    "recordingUrl" TEXT,
    CONSTRAINT "Transcript_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "Transcript_environmentId_fkey" FOREIGN KEY ("environmentId") REFERENCES "Environment" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "TranscriptLog" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "transcriptId" TEXT NOT NULL,
    "seq" INTEGER NOT NULL,
    "type" TEXT NOT NULL,
    "traceType" TEXT,
    "data" JSONB NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    CONSTRAINT "TranscriptLog_transcriptId_fkey" FOREIGN KEY ("transcriptId") REFERENCES "Transcript" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "TranscriptLogOriginal" (
    "logId" TEXT NOT NULL PRIMARY KEY,
    "data" JSONB NOT NULL,
    "expiresAt" DATETIME NOT NULL,
    CONSTRAINT "TranscriptLogOriginal_logId_fkey" FOREIGN KEY ("logId") REFERENCES "TranscriptLog" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "TranscriptRedactionPattern" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "projectId" TEXT NOT NULL,
    "pattern" TEXT NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "TranscriptRedactionPattern_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "TranscriptProperty" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "projectId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    CONSTRAINT "TranscriptProperty_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "TranscriptPropertyValue" (
    "transcriptId" TEXT NOT NULL,
    "propertyId" TEXT NOT NULL,
    "value" TEXT NOT NULL,
    "numberValue" REAL,
    "metadata" JSONB,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,

    PRIMARY KEY ("transcriptId", "propertyId"),
    CONSTRAINT "TranscriptPropertyValue_transcriptId_fkey" FOREIGN KEY ("transcriptId") REFERENCES "Transcript" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "TranscriptPropertyValue_propertyId_fkey" FOREIGN KEY ("propertyId") REFERENCES "TranscriptProperty" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "Evaluation" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "projectId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "description" TEXT,
    "enabled" BOOLEAN NOT NULL DEFAULT true,
    "type" TEXT NOT NULL,
    "prompt" TEXT NOT NULL,
    "settings" JSONB NOT NULL,
    "truePrompt" TEXT,
    "falsePrompt" TEXT,
    "minimumValue" INTEGER,
    "minimumPrompt" TEXT,
    "maximumValue" INTEGER,
    "maximumPrompt" TEXT,
    "costTotal" REAL NOT NULL DEFAULT 0,
    "costCount" INTEGER NOT NULL DEFAULT 0,
    "averageCost" REAL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    CONSTRAINT "Evaluation_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "EvaluationResult" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "evaluationId" TEXT NOT NULL,
    "transcriptId" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "runId" TEXT NOT NULL,
    "valueBoolean" BOOLEAN,
    "valueNumber" REAL,
    "valueString" TEXT,
    "reason" TEXT,
    "cost" REAL,
    "model" TEXT,
    "inputTokens" INTEGER,
    "outputTokens" INTEGER,
    "error" TEXT,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    CONSTRAINT "EvaluationResult_evaluationId_fkey" FOREIGN KEY ("evaluationId") REFERENCES "Evaluation" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "EvaluationResult_transcriptId_fkey" FOREIGN KEY ("transcriptId") REFERENCES "Transcript" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateIndex
CREATE INDEX "Transcript_projectId_createdAt_id_idx" ON "Transcript"("projectId", "createdAt", "id");

-- CreateIndex
CREATE INDEX "Transcript_projectId_updatedAt_idx" ON "Transcript"("projectId", "updatedAt");

-- CreateIndex
CREATE INDEX "Transcript_projectId_userId_createdAt_idx" ON "Transcript"("projectId", "userId", "createdAt");

-- CreateIndex
CREATE INDEX "Transcript_projectId_sessionId_idx" ON "Transcript"("projectId", "sessionId");

-- CreateIndex
CREATE INDEX "Transcript_environmentId_createdAt_idx" ON "Transcript"("environmentId", "createdAt");

-- CreateIndex
CREATE UNIQUE INDEX "Transcript_projectId_environmentId_sessionId_key" ON "Transcript"("projectId", "environmentId", "sessionId");

-- CreateIndex
CREATE INDEX "TranscriptLog_transcriptId_type_traceType_idx" ON "TranscriptLog"("transcriptId", "type", "traceType");

-- CreateIndex
CREATE UNIQUE INDEX "TranscriptLog_transcriptId_seq_key" ON "TranscriptLog"("transcriptId", "seq");

-- CreateIndex
CREATE INDEX "TranscriptLogOriginal_expiresAt_idx" ON "TranscriptLogOriginal"("expiresAt");

-- CreateIndex
CREATE INDEX "TranscriptRedactionPattern_projectId_idx" ON "TranscriptRedactionPattern"("projectId");

-- CreateIndex
CREATE UNIQUE INDEX "TranscriptProperty_projectId_name_key" ON "TranscriptProperty"("projectId", "name");

-- CreateIndex
CREATE INDEX "TranscriptPropertyValue_propertyId_value_idx" ON "TranscriptPropertyValue"("propertyId", "value");

-- CreateIndex
CREATE INDEX "TranscriptPropertyValue_propertyId_numberValue_idx" ON "TranscriptPropertyValue"("propertyId", "numberValue");

-- CreateIndex
CREATE UNIQUE INDEX "Evaluation_projectId_name_key" ON "Evaluation"("projectId", "name");

-- CreateIndex
CREATE INDEX "EvaluationResult_transcriptId_idx" ON "EvaluationResult"("transcriptId");

-- CreateIndex
CREATE INDEX "EvaluationResult_evaluationId_status_valueNumber_idx" ON "EvaluationResult"("evaluationId", "status", "valueNumber");

-- CreateIndex
CREATE INDEX "EvaluationResult_evaluationId_status_valueString_idx" ON "EvaluationResult"("evaluationId", "status", "valueString");

-- CreateIndex
CREATE UNIQUE INDEX "EvaluationResult_evaluationId_transcriptId_key" ON "EvaluationResult"("evaluationId", "transcriptId");
