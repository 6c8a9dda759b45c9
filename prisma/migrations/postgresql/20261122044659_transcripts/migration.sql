-- CreateTable
CREATE TABLE "Transcript" (
    "id" TEXT NOT NULL,
    "projectId" TEXT NOT NULL,
    "environmentId" TEXT NOT NULL,
    "sessionId" TEXT NOT NULL,
    "userId" TEXT,
    "logCount" INTEGER NOT NULL DEFAULT 0,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,
    "endedAt" TIMESTAMP(3),
    "expiresAt" TIMESTAMP(3),
    "recordingUrl" TEXT,

    CONSTRAINT "Transcript_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "TranscriptLog" (
    "id" TEXT NOT NULL,
    "transcriptId" TEXT NOT NULL,
    "seq" INTEGER NOT NULL,
    "type" TEXT NOT NULL,
    "traceType" TEXT,
    "data" JSONB NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "TranscriptLog_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "TranscriptLogOriginal" (
    "logId" TEXT NOT NULL,
    "data" JSONB NOT NULL,
    "expiresAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "TranscriptLogOriginal_pkey" PRIMARY KEY ("logId")
);

-- CreateTable
CREATE TABLE "TranscriptRedactionPattern" (
    "id" TEXT NOT NULL,
    "projectId" TEXT NOT NULL,
    "pattern" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "TranscriptRedactionPattern_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "TranscriptProperty" (
    "id" TEXT NOT NULL,
    "projectId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "TranscriptProperty_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "TranscriptPropertyValue" (
    "transcriptId" TEXT NOT NULL,
    "propertyId" TEXT NOT NULL,
    "value" TEXT NOT NULL,
    "numberValue" DOUBLE PRECISION,
    "metadata" JSONB,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "TranscriptPropertyValue_pkey" PRIMARY KEY ("transcriptId","propertyId")
);

-- CreateTable
CREATE TABLE "Evaluation" (
    "id" TEXT NOT NULL,
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
    "costTotal" DOUBLE PRECISION NOT NULL DEFAULT 0,
    "costCount" INTEGER NOT NULL DEFAULT 0,
    "averageCost" DOUBLE PRECISION,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "Evaluation_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "EvaluationResult" (
    "id" TEXT NOT NULL,
    "evaluationId" TEXT NOT NULL,
    "transcriptId" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "runId" TEXT NOT NULL,
    "valueBoolean" BOOLEAN,
    "valueNumber" DOUBLE PRECISION,
    "valueString" TEXT,
    "reason" TEXT,
    "cost" DOUBLE PRECISION,
    "model" TEXT,
    "inputTokens" INTEGER,
    "outputTokens" INTEGER,
    "error" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "EvaluationResult_pkey" PRIMARY KEY ("id")
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

-- AddForeignKey
ALTER TABLE "Transcript" ADD CONSTRAINT "Transcript_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Transcript" ADD CONSTRAINT "Transcript_environmentId_fkey" FOREIGN KEY ("environmentId") REFERENCES "Environment"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "TranscriptLog" ADD CONSTRAINT "TranscriptLog_transcriptId_fkey" FOREIGN KEY ("transcriptId") REFERENCES "Transcript"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "TranscriptLogOriginal" ADD CONSTRAINT "TranscriptLogOriginal_logId_fkey" FOREIGN KEY ("logId") REFERENCES "TranscriptLog"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "TranscriptRedactionPattern" ADD CONSTRAINT "TranscriptRedactionPattern_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "TranscriptProperty" ADD CONSTRAINT "TranscriptProperty_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "TranscriptPropertyValue" ADD CONSTRAINT "TranscriptPropertyValue_transcriptId_fkey" FOREIGN KEY ("transcriptId") REFERENCES "Transcript"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "TranscriptPropertyValue" ADD CONSTRAINT "TranscriptPropertyValue_propertyId_fkey" FOREIGN KEY ("propertyId") REFERENCES "TranscriptProperty"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Evaluation" ADD CONSTRAINT "Evaluation_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "EvaluationResult" ADD CONSTRAINT "EvaluationResult_evaluationId_fkey" FOREIGN KEY ("evaluationId") REFERENCES "Evaluation"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "EvaluationResult" ADD CONSTRAINT "EvaluationResult_transcriptId_fkey" FOREIGN KEY ("transcriptId") REFERENCES "Transcript"("id") ON DELETE CASCADE ON UPDATE CASCADE;
