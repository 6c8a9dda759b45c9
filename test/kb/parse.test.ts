import { afterEach, describe, expect, it, vi } from 'vitest';
import { KbIngestError } from '../../src/kb/errors';
import { extractText, type KbFileType, kbFileTypeOf, normalizeText } from '../../src/kb/parse';
import { makeDocx, makePdf, makeScannedLikePdf } from '../helpers/kb-fixtures';

/** Every fixture is made here, in memory: nothing is read from disk or the network. */

const utf8 = (s: string) => new TextEncoder().encode(s);

async function ingestError(input: Parameters<typeof extractText>[0]): Promise<KbIngestError> {
  const err = await extractText(input).then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(KbIngestError);
  return err as KbIngestError;
}

describe('kbFileTypeOf', () => {
  it.each([
    ['notes.txt', 'text'],
    ['README.MD', 'markdown'],
    ['page.Html', 'html'],
    ['page.htm', 'html'],
    ['Report.PDF', 'pdf'],
    ['letter.docx', 'docx'],
    ['rows.csv', 'csv'],
    ['data.json', 'json'],
  ] as const)('%s is %s', (name, type) => {
    expect(kbFileTypeOf(name)).toBe(type);
  });

  it('prefers the extension and falls back to the content type', () => {
    expect(kbFileTypeOf('data.json', 'text/plain')).toBe('json');
    expect(kbFileTypeOf('/wiki/Widget', 'text/html; charset=utf-8')).toBe('html');
    expect(kbFileTypeOf('download', 'application/pdf')).toBe('pdf');
    expect(kbFileTypeOf('feed', 'application/ld+json')).toBe('json');
    expect(kbFileTypeOf('x', 'application/vnd.openxmlformats-officedocument.wordprocessingml.document')).toBe('docx');
  });

  it('answers null for unsupported files', () => {
    expect(kbFileTypeOf('slides.pptx')).toBeNull();
    expect(kbFileTypeOf('old.doc')).toBeNull();
    expect(kbFileTypeOf('image.png', 'image/png')).toBeNull();
    expect(kbFileTypeOf('noextension')).toBeNull();
    expect(kbFileTypeOf('archive.zip', 'application/octet-stream')).toBeNull();
  });
});

describe('normalizeText', () => {
  it('NFC, no controls or NUL, collapsed spaces, one blank line between paragraphs', () => {
    const raw = '  Cafe\u0301\u0000 au\t\t lait\u00a0\u00a0ok \r\n\r\n\r\n\f line\u00ad two\u200b \n  third\u0007  ';
    expect(normalizeText(raw)).toBe('Café au lait ok\n\nline two\nthird');
  });

  it('replaces lone surrogates', () => {
    expect(normalizeText('a\ud800b')).toBe('a\ufffdb');
  });
});

describe('extractText', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('text: UTF-8 with a BOM, normalised', async () => {
    const bytes = new Uint8Array([0xef, 0xbb, 0xbf, ...utf8('Première ligne\r\n\r\n\r\nDeuxième   ligne\u0000')]);
    expect(await extractText({ bytes, type: 'text' })).toEqual({
      text: 'Première ligne\n\nDeuxième ligne',
      title: null,
    });
  });

  it('text: UTF-16 with a BOM (what some Windows editors save)', async () => {
    const body = 'Hello Wörld';
    const bytes = new Uint8Array(2 + body.length * 2);
    bytes.set([0xff, 0xfe]);
    for (let i = 0; i < body.length; i++) bytes[2 + i * 2] = body.charCodeAt(i);
    expect((await extractText({ bytes, type: 'text' })).text).toBe('Hello Wörld');
  });

  it('text: invalid UTF-8 is an actionable error, not mojibake', async () => {
    const bytes = new Uint8Array([...utf8('caf'), 0xe9, ...utf8(' au lait')]); // windows-1252 é
    const err = await ingestError({ bytes, type: 'text', filename: 'menu.txt' });
    expect(err.permanent).toBe(true);
    expect(err.message).toBe(
      'The text file is not valid UTF-8 text (first bad byte at offset 3): save it with UTF-8 encoding and upload it again.',
    );
  });

  it('text: a charset declared by a web server is honoured', async () => {
    const bytes = new Uint8Array([...utf8('caf'), 0xe9]);
    const { text } = await extractText({ bytes, type: 'text', contentType: 'text/plain; charset=ISO-8859-1' });
    expect(text).toBe('café');
  });

  it('text: empty or whitespace-only is a permanent error', async () => {
    const err = await ingestError({ bytes: utf8(' \n\t\u0000 '), type: 'text', filename: 'blank.txt' });
    expect(err.permanent).toBe(true);
    expect(err.message).toBe('The text file "blank.txt" has no text.');
  });

  it('markdown: kept as written, title from the first heading', async () => {
    const md = '# Widget guide\n\nWidgets   are *small*.\n\n- one\n- two\n';
    expect(await extractText({ bytes: utf8(md), type: 'markdown' })).toEqual({
      text: '# Widget guide\n\nWidgets are *small*.\n\n- one\n- two',
      title: 'Widget guide',
    });
    const front = '---\ntitle: "From front matter"\n---\n# Heading\n\nBody';
    expect((await extractText({ bytes: utf8(front), type: 'markdown' })).title).toBe('From front matter');
  });

  it('html: Readability keeps the article and drops navigation and footer', async () => {
    const filler = 'Widgets are small devices that do one thing well, and they are used in most homes. ';
    const html = `<!doctype html><html><head><title>Widget guide</title><style>.x{color:red}</style></head><body>
      <nav><a href="/">Home</a> | <a href="/shop">Shop</a> | <a href="/about">About us</a></nav>
      <header><div class="logo">ACME Corp</div></header>
      <main><article><h1>Widget guide</h1>
        <p>${filler.repeat(4)}</p>
        <h2>Installing</h2>
        <p>Unscrew the panel, insert the widget &amp; tighten the screws. ${filler.repeat(3)}</p>
        <ul><li>First step</li><li>Second step</li></ul>
        <script>document.write("tracking code")</script>
      </article></main>
      <footer>Copyright 2024 ACME Corp. All rights reserved. <a href="/privacy">Privacy policy</a></footer>
    </body></html>`;
    const { text, title } = await extractText({ bytes: utf8(html), type: 'html', url: 'https://example.com/guide' });
    expect(title).toBe('Widget guide');
    expect(text.startsWith('Widget guide\n\nWidgets are small devices')).toBe(true);
    expect(text).toContain('Installing\n\nUnscrew the panel, insert the widget & tighten the screws.');
    expect(text).toContain('First step\nSecond step');
    for (const boilerplate of ['About us', 'Copyright', 'Privacy policy', 'tracking code', 'color:red'])
      expect(text).not.toContain(boilerplate);
  });

  it('html: falls back to the body text when Readability finds no article', async () => {
    const html = '<html><body><div>Opening hours</div><div>Mon–Fri 9:00–17:00</div></body></html>';
    const { text } = await extractText({ bytes: utf8(html), type: 'html' });
    expect(text).toBe('Opening hours\n\nMon–Fri 9:00–17:00');
  });

  it('html: a fragment without <html> or <body>', async () => {
    const { text, title } = await extractText({
      bytes: utf8('<title>Hours</title><p>Open daily.</p><p>Closed on holidays.</p>'),
      type: 'html',
    });
    expect(title).toBe('Hours');
    expect(text).toBe('Hours\n\nOpen daily.\n\nClosed on holidays.');
  });

  it('html: a page without text names its address', async () => {
    const html = '<html><head><title></title></head><body><script>app()</script><img src="x.png"></body></html>';
    const err = await ingestError({ bytes: utf8(html), type: 'html', url: 'https://example.com/app' });
    expect(err.message).toBe('The page at https://example.com/app has no readable text.');
    expect(err.permanent).toBe(true);
  });

  it('html: decodes the charset of a <meta> tag', async () => {
    const bytes = new Uint8Array([
      ...utf8('<html><head><meta charset="windows-1252"></head><body><p>Caf'),
      0xe9,
      ...utf8('</p></body></html>'),
    ]);
    expect((await extractText({ bytes, type: 'html' })).text).toBe('Café');
  });

  it('pdf: text of two pages, with the title from the metadata, and nothing fetched', async () => {
    const fetchSpy = vi.spyOn(globalThis, 'fetch');
    const bytes = await makePdf([
      [
        'Widget manual, page one.',
        'Second line of the first paragraph.',
        '',
        'A new paragraph after a gap, about instal-',
        'lation.',
      ],
      ['Page two talks about screws.', '• first bullet', '• second bullet'],
    ]);
    const { text, title } = await extractText({ bytes, type: 'pdf' });
    expect(title).toBe('Widget manual');
    expect(text).toBe(
      [
        'Widget manual, page one. Second line of the first paragraph.',
        'A new paragraph after a gap, about installation.',
        'Page two talks about screws.\n• first bullet\n• second bullet',
      ].join('\n\n'),
    );
    expect(fetchSpy).not.toHaveBeenCalled();
    // pdf.js transfers the buffer it reads; the caller's bytes must survive (a retry reads them).
    expect(bytes.byteLength).toBeGreaterThan(0);
    expect((await extractText({ bytes, type: 'pdf' })).text).toBe(text);
  });

  it('pdf: pages without a text layer are an actionable error', async () => {
    const err = await ingestError({ bytes: await makeScannedLikePdf(), type: 'pdf' });
    expect(err.message).toBe('The PDF has no text layer (scanned pages?): run it through OCR first.');
    expect(err.permanent).toBe(true);
  });

  it('pdf: bytes that are not a PDF', async () => {
    const err = await ingestError({ bytes: utf8('%PDF-1.7 but then nothing useful'), type: 'pdf' });
    expect(err.code).toBe('MALFORMED');
    expect(err.message).toMatch(/^The PDF file is damaged or not a PDF/);
  });

  it('docx: paragraphs of word/document.xml', async () => {
    const bytes = makeDocx(['Widget policy', 'Returns are accepted within 30 days.', 'Keep the receipt & box.']);
    expect(await extractText({ bytes, type: 'docx' })).toEqual({
      text: 'Widget policy\n\nReturns are accepted within 30 days.\n\nKeep the receipt & box.',
      title: null,
    });
  });

  it('docx: a damaged file or a ZIP without a document', async () => {
    const message =
      'The DOCX file is damaged or not a Word document: open it in Word or LibreOffice, save it as .docx and upload it again.';
    const truncated = makeDocx(['Hello']).slice(0, 200);
    for (const bytes of [utf8('PK this is not a zip'), truncated, makeDocx([], { omitDocument: true })]) {
      const err = await ingestError({ bytes, type: 'docx' });
      expect(err.message).toBe(message);
      expect(err.permanent).toBe(true);
    }
  });

  it('docx: an OLE file (encrypted DOCX or old .doc) says so', async () => {
    const bytes = new Uint8Array([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1, 0, 0, 0, 0]);
    const err = await ingestError({ bytes, type: 'docx' });
    expect(err.code).toBe('ENCRYPTED');
  });

  it('docx: refuses a file whose XML would unpack past the limit, before inflating it', async () => {
    // A small archive whose central directory declares 200 MB for word/document.xml (what a
    // real bomb declares; making one here would take seconds).
    const bytes = makeDocx(['Hello']);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    for (let at = bytes.length - 22; at >= 0; at--) {
      if (view.getUint32(at, true) !== 0x02014b50) continue;
      const nameLength = view.getUint16(at + 28, true);
      const name = new TextDecoder().decode(bytes.subarray(at + 46, at + 46 + nameLength));
      if (name === 'word/document.xml') view.setUint32(at + 24, 200 * 1024 * 1024, true);
    }
    const err = await ingestError({ bytes, type: 'docx' });
    expect(err.code).toBe('TOO_LARGE');
  });

  it('csv: header names the columns, one paragraph per row, quoted commas kept', async () => {
    const csv =
      '\uFEFFname,price,notes\r\n"Widget, large",12.50,"Says ""hello"""\r\nGadget,3,\r\n\r\n,,\r\nGizmo,7\r\n';
    expect(await extractText({ bytes: utf8(csv), type: 'csv' })).toEqual({
      text: 'name: Widget, large\nprice: 12.50\nnotes: Says "hello"\n\nname: Gadget\nprice: 3\n\nname: Gizmo\nprice: 7',
      title: null,
    });
  });

  it('csv: semicolon-separated files (Excel in many locales)', async () => {
    const { text } = await extractText({ bytes: utf8('name;price\nWidget;12,50\n'), type: 'csv' });
    expect(text).toBe('name: Widget\nprice: 12,50');
  });

  it('csv: a malformed file names the line', async () => {
    const csv = ['a,b,c', '1,2,3', '4,5,6', '7,8,9', '10,11,12', '13,14,15', '16,17,18,19', '20,21,22'].join('\n');
    const err = await ingestError({ bytes: utf8(csv), type: 'csv' });
    expect(err.message).toBe(
      'The CSV is malformed at line 7: the row has 4 fields but the header has fewer (an unquoted separator inside a value?). Fix the file and upload it again.',
    );
    const unclosed = await ingestError({ bytes: utf8('a,b\n1,"open\n2,3\n'), type: 'csv' });
    expect(unclosed.message).toMatch(/^The CSV is malformed at line \d+: a quoted value is never closed\./);
  });

  it('json: nested objects flattened to path: value lines, one paragraph per record', async () => {
    const json = JSON.stringify([
      { name: 'Widget', price: 12.5, tags: ['small', 'blue'], stock: { warehouse: 'North', count: 3 }, note: null },
      { name: 'Gadget', active: true, parts: [{ id: 'p1' }, { id: 'p2' }] },
    ]);
    expect((await extractText({ bytes: utf8(json), type: 'json' })).text).toBe(
      [
        'name: Widget\nprice: 12.5\ntags: small, blue\nstock.warehouse: North\nstock.count: 3',
        'name: Gadget\nactive: true',
        'parts[0].id: p1',
        'parts[1].id: p2',
      ].join('\n\n'),
    );
    const object = JSON.stringify({ title: 'FAQ', 'odd key': { deep: 'yes' } });
    expect((await extractText({ bytes: utf8(object), type: 'json' })).text).toBe('title: FAQ\n"odd key".deep: yes');
  });

  it('json: malformed and empty', async () => {
    const bad = await ingestError({ bytes: utf8('{"a": 1,}'), type: 'json' });
    expect(bad.message).toMatch(/^The JSON is malformed: .+\. Fix the file and upload it again\.$/);
    const empty = await ingestError({ bytes: utf8('{"a": null, "b": []}'), type: 'json', filename: 'e.json' });
    expect(empty.message).toBe('The JSON file "e.json" has no text.');
  });

  it('an aborted signal stops the work with a transient error', async () => {
    const controller = new AbortController();
    controller.abort();
    const err = await ingestError({ bytes: utf8('text'), type: 'text', signal: controller.signal });
    expect(err.code).toBe('ABORTED');
    expect(err.permanent).toBe(false);
  });

  it('never returns NUL or control characters for any type', async () => {
    const dirty = 'a\u0000b\u0001c\u007fd';
    const cases: [KbFileType, Uint8Array][] = [
      ['text', utf8(dirty)],
      ['markdown', utf8(dirty)],
      ['html', utf8(`<p>${dirty}</p>`)],
      ['csv', utf8(`h\n${dirty}`)],
      ['json', utf8(JSON.stringify({ k: dirty }))],
      ['docx', makeDocx(['abcd'])],
    ];
    for (const [type, bytes] of cases) {
      // biome-ignore lint/suspicious/noControlCharactersInRegex: asserting their absence
      expect((await extractText({ bytes, type })).text).not.toMatch(/[\u0000-\u0008\u000e-\u001f\u007f-\u009f]/);
    }
  });
});
