-- CreateTable
CREATE TABLE "WebChatSettings" (
    "id" TEXT NOT NULL,
    "projectId" TEXT NOT NULL,
    "environmentId" TEXT NOT NULL,
    "enabled" BOOLEAN NOT NULL DEFAULT false,
    "allowedOrigins" JSONB NOT NULL,
    "title" TEXT NOT NULL,
    "description" TEXT NOT NULL,
    "primaryColor" TEXT NOT NULL,
    "avatarImage" TEXT,
    "launcherImage" TEXT,
    "position" TEXT NOT NULL DEFAULT 'right',
    "persistence" TEXT NOT NULL DEFAULT 'localStorage',
    "feedback" BOOLEAN NOT NULL DEFAULT true,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "WebChatSettings_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "WebChatSettings_environmentId_key" ON "WebChatSettings"("environmentId");

-- CreateIndex
CREATE INDEX "WebChatSettings_projectId_idx" ON "WebChatSettings"("projectId");

-- AddForeignKey
ALTER TABLE "WebChatSettings" ADD CONSTRAINT "WebChatSettings_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "WebChatSettings" ADD CONSTRAINT "WebChatSettings_environmentId_fkey" FOREIGN KEY ("environmentId") REFERENCES "Environment"("id") ON DELETE CASCADE ON UPDATE CASCADE;
