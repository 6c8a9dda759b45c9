import pino from 'pino';

export type Logger = pino.Logger;

/** Structured JSON logs on stderr, so a CLI command's stdout stays machine-readable. */
export function createLogger(level: string, bindings: Record<string, unknown> = {}): Logger {
  return pino({ level, base: { service: 'parley', ...bindings } }, pino.destination(2));
}
