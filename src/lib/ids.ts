import { randomBytes } from 'node:crypto';

let counter = randomBytes(3).readUIntBE(0, 3);
const processUnique = randomBytes(5);

/**
 * A new 24-character lowercase hex ID, laid out like a MongoDB ObjectID: 4 bytes of seconds since
 * the epoch, 5 random bytes fixed per process, and a 3-byte counter. IDs sort by creation time.
 */
export function newId(now: number = Date.now()): string {
  const buf = Buffer.alloc(12);
  buf.writeUInt32BE(Math.floor(now / 1000) >>> 0, 0);
  processUnique.copy(buf, 4);
  counter = (counter + 1) % 0x1000000;
  buf.writeUIntBE(counter, 9, 3);
  return buf.toString('hex');
}

export const idPattern = /^[0-9a-f]{24}$/;

export function isId(value: string): boolean {
  return idPattern.test(value);
}
