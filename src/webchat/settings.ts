import { z } from 'zod';
import { resolveEnvironment } from '../admin/environments';
import type { PrismaDb } from '../db/client';
import { newId } from '../lib/ids';

/**
 * Web chat settings per (project, environment): whether the official widget's public routes answer
 * at all, to which browser origins, and what the widget shows (docs/web-chat.md). Off until a
 * project turns it on; an environment with no stored row is off.
 */

export const webChatPositions = ['left', 'right'] as const;
export const webChatPersistences = ['localStorage', 'sessionStorage', 'memory'] as const;

/** An origin exactly as a browser sends it: scheme, host and an optional port, nothing else. */
export const originSchema = z
  .string()
  .max(300)
  .refine((value) => {
    try {
      const url = new URL(value);
      return (url.protocol === 'http:' || url.protocol === 'https:') && url.origin === value;
    } catch {
      return false;
    }
  }, 'must be an origin such as https://example.com (scheme, host, optional port; no path or trailing slash)');

const imageUrlSchema = z
  .string()
  .max(2000)
  .refine((value) => {
    try {
      const url = new URL(value);
      return url.protocol === 'https:' || url.protocol === 'http:';
    } catch {
      return false;
    }
  }, 'must be an http(s) URL');

/** The fields a caller may set; every field is optional (an update changes only what it names). */
export const webChatSettingsInputSchema = z.strictObject({
  enabled: z.boolean().optional(),
  allowedOrigins: z.array(originSchema).max(50).optional(),
  title: z.string().min(1).max(100).optional(),
  description: z.string().max(500).optional(),
  primaryColor: z
    .string()
    .regex(/^#[0-9a-fA-F]{6}$/, 'must be a colour such as #2e7ff1')
    .optional(),
  avatarImage: imageUrlSchema.nullable().optional(),
  launcherImage: imageUrlSchema.nullable().optional(),
  position: z.enum(webChatPositions).optional(),
  persistence: z.enum(webChatPersistences).optional(),
  feedback: z.boolean().optional(),
});
export type WebChatSettingsInput = z.infer<typeof webChatSettingsInputSchema>;

export interface WebChatSettings {
  projectId: string;
  environmentId: string;
  environmentAlias: string;
  enabled: boolean;
  allowedOrigins: string[];
  title: string;
  description: string;
  primaryColor: string;
  avatarImage: string | null;
  launcherImage: string | null;
  position: (typeof webChatPositions)[number];
  persistence: (typeof webChatPersistences)[number];
  feedback: boolean;
  updatedAt: Date | null;
}

export const webChatDefaults = {
  enabled: false,
  allowedOrigins: [] as string[],
  title: 'Assistant',
  description: '',
  primaryColor: '#2e7ff1',
  avatarImage: null,
  launcherImage: null,
  position: 'right',
  persistence: 'localStorage',
  feedback: true,
} as const;

type Row = {
  enabled: boolean;
  allowedOrigins: unknown;
  title: string;
  description: string;
  primaryColor: string;
  avatarImage: string | null;
  launcherImage: string | null;
  position: string;
  persistence: string;
  feedback: boolean;
  updatedAt: Date;
};

function settingsOf(env: { id: string; alias: string; projectId: string }, row: Row | null): WebChatSettings {
  const base = row ?? { ...webChatDefaults, updatedAt: null };
  return {
    projectId: env.projectId,
    environmentId: env.id,
    environmentAlias: env.alias,
    enabled: base.enabled,
    allowedOrigins: Array.isArray(base.allowedOrigins) ? (base.allowedOrigins as string[]) : [],
    title: base.title,
    description: base.description,
    primaryColor: base.primaryColor,
    avatarImage: base.avatarImage,
    launcherImage: base.launcherImage,
    position: base.position === 'left' ? 'left' : 'right',
    persistence: (webChatPersistences as readonly string[]).includes(base.persistence)
      ? (base.persistence as WebChatSettings['persistence'])
      : 'localStorage',
    feedback: base.feedback,
    updatedAt: base.updatedAt,
  };
}

/** The settings of an environment (ID or alias; default `development`): stored, or the defaults (off). */
export async function getWebChatSettings(
  db: PrismaDb,
  projectId: string,
  environment?: string | null,
): Promise<WebChatSettings> {
  const env = await resolveEnvironment(db, projectId, environment, { webChatSettings: true });
  return settingsOf(env, env.webChatSettings);
}

/** Changes the fields `input` names (creating the row from the defaults the first time). */
export async function updateWebChatSettings(
  db: PrismaDb,
  projectId: string,
  environment: string | null | undefined,
  input: WebChatSettingsInput,
): Promise<WebChatSettings> {
  const env = await resolveEnvironment(db, projectId, environment);
  const data = Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined)) as WebChatSettingsInput;
  const row = await db.webChatSettings.upsert({
    where: { environmentId: env.id },
    create: { ...webChatDefaults, id: newId(), projectId, environmentId: env.id, ...data },
    update: data,
  });
  return settingsOf(env, row);
}

/** Whether a browser origin may use the widget routes under these settings. */
export function originAllowed(settings: WebChatSettings, origin: string | undefined): boolean {
  return origin !== undefined && settings.allowedOrigins.includes(origin);
}

/**
 * What `GET /public/{projectID}/publishing` answers: the widget's assistant options (title,
 * description, color, image, avatar, launcher, position, persistence, feedback, watermark). Images
 * the project did not set are Parley's own (`assetBase` is this instance's public URL of
 * /webchat/assets), so the widget loads nothing from a third party.
 */
export function publishingOf(settings: WebChatSettings, assetBase: string) {
  const avatar = settings.avatarImage ?? `${assetBase}/avatar.svg`;
  return {
    title: settings.title,
    description: settings.description,
    color: settings.primaryColor,
    image: avatar,
    avatar,
    launcher: settings.launcherImage ?? `${assetBase}/launcher.svg`,
    position: settings.position,
    persistence: settings.persistence,
    feedback: settings.feedback,
    watermark: false,
  };
}

/**
 * The settings of every environment of a project that has web chat on. A CORS preflight carries no
 * `versionID` header (browsers never send a custom header's value in one), and the widget's
 * transcripts POST sends none either, so those requests are admitted by any of these.
 */
export async function listEnabledWebChatSettings(db: PrismaDb, projectId: string): Promise<WebChatSettings[]> {
  const rows = await db.webChatSettings.findMany({
    where: { projectId, enabled: true },
    include: { environment: { select: { id: true, alias: true, projectId: true } } },
    orderBy: { environmentId: 'asc' },
  });
  return rows.map((row) => settingsOf(row.environment, row));
}
