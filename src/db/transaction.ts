import type { PrismaDb } from './client';

/**
 * A Prisma client or an interactive transaction's client. Domain functions that take one can run
 * inside a caller's transaction (the runtime records a turn and its transcript logs atomically).
 */
export type PrismaTx = Parameters<Parameters<PrismaDb['$transaction']>[0]>[0];

/** Prisma's "unique constraint failed" (P2002), on either provider. */
export function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === 'P2002';
}
