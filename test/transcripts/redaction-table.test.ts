import { describe, expect, it } from 'vitest';
import {
  cardIssuerOf,
  compileRedactionPatterns,
  createRedactor,
  isCardNumber,
  parsePhoneRegions,
} from '../../src/transcripts/redaction';

/**
 * What redaction must keep and what it must remove. After the retention period the originals are
 * purged, so every false positive here would destroy data for good.
 */
describe('redaction: false positives and true positives', () => {
  const redact = createRedactor();

  const kept: [what: string, text: string][] = [
    ['an order number', 'Order 12345678 has shipped'],
    ['an order number with a hash', 'Your order #98765432 is on its way'],
    ['a ten-digit order number', 'Order 4155552671 was cancelled'],
    ['an invoice number', 'invoice 2024-000123 is due'],
    ['a reference with dashes', 'ref 123-4567-890'],
    ['an IPv4 address', 'the server at 192.168.100.200 is down'],
    ['another IPv4 address', 'ping 10.0.0.1 and 172.16.254.1'],
    ['a UUID', 'session 550e8400-e29b-41d4-a716-446655440000 expired'],
    ['a UUID of digits', 'id 12345678-1234-1234-1234-123456789012'],
    ['a version', 'upgrade to 10.20.30 or 1.2.3.4567'],
    ['a semantic version with build', 'build 2.14.1234567'],
    ['an epoch timestamp in seconds', 'created at 1700000000'],
    ['an epoch timestamp in milliseconds', 'time 1700000000123'],
    ['an ISO timestamp', 'at 2026-01-02T03:04:05.678Z'],
    ['an amount', 'total 1234567.89'],
    ['an amount with thousands separators', 'you owe $1,234,567.89 (or 1.234.567,89 €)'],
    ['an amount with a currency sign', 'price €12345678'],
    ['an ISBN-13 with dashes', 'ISBN 978-3-16-148410-0'],
    ['an ISBN-13', 'ISBN 9783161484100'],
    ['an ISBN-10', 'ISBN 0-306-40615-2'],
    ['dates', 'on 2026-01-02, 02/01/2026 or 02.01.2026'],
    ['years in a row', 'in 2019 2020 2021 2022 2023'],
    ['years in a list', 'seasons 2019, 2020, 2021, 2022'],
    ['a time', 'at 12:30:45'],
    ['a ZIP+4 code', 'ZIP 94103-1234'],
    ['a percentage', 'uptime 99999999%'],
    ['a card number that fails Luhn', 'order 4111 1111 1111 1112'],
    ['a card number that fails Luhn, in fullwidth digits', 'order ４１１１ １１１１ １１１１ １１１２'],
    ['a Luhn-valid number with no issuer', 'account 9999 9999 9999 9995'],
    ['a 16-digit tracking number', 'tracking 1234567890123452'],
    ['an address that is not one', 'not@an address, or user@localhost'],
    ['a short number', 'ticket 12345, room 42'],
  ];
  it.each(kept)('keeps %s', (_what, text) => {
    expect(redact.text(text)).toBe(text);
  });

  const removed: [what: string, text: string, expected: string][] = [
    ['a US number in national grouping', 'call (415) 555-2671 today', 'call [phone] today'],
    ['a US number with dashes', 'it is 415-555-2671.', 'it is [phone].'],
    ['a US number in international form', 'dial +1 415 555 2671', 'dial [phone]'],
    ['a bare US number after a cue', 'call me on 4155552671', 'call me on [phone]'],
    ['a UK landline', 'ring 020 7946 0958', 'ring [phone]'],
    ['a UK mobile', 'my mobile is 07700 900123', 'my mobile is [phone]'],
    ['a UK number with 00', 'from abroad 0044 20 7946 0958', 'from abroad [phone]'],
    ['a UK number in international form', 'or +44 20 7946 0958', 'or [phone]'],
    ['a German mobile', 'Handy 0151 23456789', 'Handy [phone]'],
    ['a German landline', 'Büro 030 12345678', 'Büro [phone]'],
    ['a German number in international form', 'Tel. +49 30 12345678', 'Tel. [phone]'],
    ['a French number', 'appelez le 01 23 45 67 89', 'appelez le [phone]'],
    ['a French number with dots', 'tél 06.12.34.56.78', 'tél [phone]'],
    ['a French number in international form', '+33 6 12 34 56 78', '[phone]'],
    ['an Indian mobile', 'IN +91 98765 43210', 'IN [phone]'],
    ['a Brazilian mobile', 'BR +55 11 91234-5678', 'BR [phone]'],
    ['a Spanish number', 'llámame al 912 34 56 78', 'llámame al [phone]'],
    ['an Australian mobile', 'AU 0412 345 678', 'AU [phone]'],
    ['a Japanese number in international form', 'JP +81 3-1234-5678', 'JP [phone]'],
    // Digits of other scripts, which the phone detector reads as digits (fewer than 7 ASCII digits).
    ['a UK number in fullwidth digits', 'call me at ＋４４ ２０ ７９４６ ０９５８', 'call me at [phone]'],
    ['a Japanese number in fullwidth digits', 'tel ０９０－１２３４－５６７８', 'tel [phone]'],
    ['a Saudi number in Arabic-Indic digits', 'اتصل بي على +٩٦٦ ٥٠ ١٢٣ ٤٥٦٧', 'اتصل بي على [phone]'],
    ['an Iranian number in Eastern Arabic-Indic digits', 'تلفن +۹۸ ۹۱۲ ۳۴۵ ۶۷۸۹', 'تلفن [phone]'],
    ['a Visa card in fullwidth digits', 'カード ４１１１ １１１１ １１１１ １１１１ です', 'カード [card] です'],
    ['a Mastercard in Arabic-Indic digits', 'البطاقة ٥٥٠٠٠٠٥٥٥٥٥٥٥٥٥٩', 'البطاقة [card]'],
    ['a Visa card', 'card 4111 1111 1111 1111, exp 12/28', 'card [card], exp 12/28'],
    ['a Visa card with dashes', 'card 4111-1111-1111-1111', 'card [card]'],
    ['a Mastercard', 'number 5500005555555559', 'number [card]'],
    ['a Mastercard in the 2-series', 'mc 2223 0031 2200 3222', 'mc [card]'],
    ['an American Express card', 'amex 3782 822463 10005', 'amex [card]'],
    ['a Discover card', 'discover 6011111111111117', 'discover [card]'],
    ['a JCB card', 'jcb 3530111333300000', 'jcb [card]'],
    ['an e-mail address', 'write to Ann.Lee+tag@mail.example.co.uk today', 'write to [email] today'],
    ['an e-mail address in brackets', '<a@example.com>', '<[email]>'],
    ['an e-mail address with unusual characters', "o'brien_x!@sub.example.org.", '[email].'],
  ];
  it.each(removed)('removes %s', (_what, text, expected) => {
    expect(redact.text(text)).toBe(expected);
  });

  it('reads national numbers only in the configured regions', () => {
    const usOnly = createRedactor([], ['US']);
    expect(usOnly.text('ring 020 7946 0958')).toBe('ring 020 7946 0958');
    expect(usOnly.text('or +44 20 7946 0958')).toBe('or [phone]');
    expect(usOnly.text('call (415) 555-2671')).toBe('call [phone]');
    const ukOnly = createRedactor([], ['GB']);
    expect(ukOnly.text('call (415) 555-2671')).toBe('call (415) 555-2671');
  });

  it('gives the same answer when a string comes again (strings found clean are not scanned twice)', () => {
    // A second and third pass over every case, after the first pass above left the clean ones in
    // the memo: each answer is still the expected one.
    for (let pass = 0; pass < 2; pass++) {
      for (const [, text] of kept) expect(redact.text(text)).toBe(text);
      for (const [, text, expected] of removed) expect(redact.text(text)).toBe(expected);
    }
    // The runtime's path IDs hold 7 digits or more, and are kept every time.
    for (let i = 0; i < 3; i++) expect(redact.text('path-6f76239f84')).toBe('path-6f76239f84');
    // Clean for one list of regions is not clean for another: the memo is per list.
    const usOnly = createRedactor([], ['US']);
    const ukOnly = createRedactor([], ['GB']);
    for (let i = 0; i < 2; i++) {
      expect(usOnly.text('ring 020 7946 0958')).toBe('ring 020 7946 0958');
      expect(ukOnly.text('ring 020 7946 0958')).toBe('ring [phone]');
    }
    // A project's own patterns still apply to a string the built-in detectors found clean.
    const own = createRedactor(compileRedactionPatterns(['path-[0-9a-f]+']));
    expect(own.text('path-6f76239f84')).toBe('[redacted]');
    expect(own.json({ path: 'path-6f76239f84' })).toEqual({ value: { path: '[redacted]' }, changed: true });
    // A string that holds a phone number is redacted however often it comes.
    for (let i = 0; i < 3; i++) expect(redact.text('call (415) 555-2671 today')).toBe('call [phone] today');
  });

  it('redacts JSON values copying only what holds something redacted', () => {
    const clean = { type: 'text', payload: { message: 'Hi', path: 'path-6f76239f84', n: 3, ok: true, none: null } };
    const cleanOut = redact.json(clean);
    expect(cleanOut).toEqual({ value: clean, changed: false });
    expect(cleanOut.value).toBe(clean); // nothing to redact: the value itself, no copy
    const mixed = {
      keep: { a: ['x', 1, { b: 'y' }] },
      list: ['one', 'call (415) 555-2671', 'three', { c: 'write to a@example.com' }],
      after: { z: 'last' },
    };
    const before = JSON.stringify(mixed);
    const out = redact.json(mixed);
    expect(out.changed).toBe(true);
    expect(out.value).toEqual({
      keep: { a: ['x', 1, { b: 'y' }] },
      list: ['one', 'call [phone]', 'three', { c: 'write to [email]' }],
      after: { z: 'last' },
    });
    expect(JSON.stringify(mixed)).toBe(before); // the input is left as it was
    // Key order is kept, before and after the first redacted member.
    expect(Object.keys(out.value as object)).toEqual(['keep', 'list', 'after']);
    // A Date (not a plain object) becomes a plain copy of its own entries, as before, unchanged.
    const dated = redact.json({ at: new Date(0), s: 'x' });
    expect(dated).toEqual({ value: { at: {}, s: 'x' }, changed: false });
    expect(JSON.stringify(dated.value)).toBe('{"at":{},"s":"x"}');
  });

  it('knows card issuers by prefix and length', () => {
    expect(cardIssuerOf('4111111111111111')).toBe('visa');
    expect(cardIssuerOf('378282246310005')).toBe('amex');
    expect(cardIssuerOf('37828224631000')).toBeUndefined(); // an Amex prefix with 14 digits
    expect(cardIssuerOf('9999999999999995')).toBeUndefined();
    expect(isCardNumber('4111 1111 1111 1111')).toBe(true);
    expect(isCardNumber('4111 1111 1111 1112')).toBe(false);
  });

  it('parses the region setting and names an unknown region', () => {
    expect(parsePhoneRegions('us, gb,DE,,us')).toEqual({ ok: true, regions: ['US', 'GB', 'DE'] });
    expect(parsePhoneRegions('US,XX')).toEqual({
      ok: false,
      message: 'XX is not a region with a phone numbering plan',
    });
  });
});
