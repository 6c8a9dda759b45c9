import { decodeText } from './decode';
import { normalizeText } from './normalize';

export function extractPlainText(
  bytes: Uint8Array,
  contentType?: string | null,
): { text: string; title: string | null } {
  return { text: normalizeText(decodeText(bytes, 'text file', contentType)), title: null };
}
