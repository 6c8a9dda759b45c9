import { describe, expect, it } from 'vitest';
import { tableRowToChunk } from '../../src/kb/table';

describe('tableRowToChunk', () => {
  const schema = {
    searchableFields: ['name', 'description', 'price', 'tags'],
    metadataFields: ['category', 'inner', 'price'],
  };

  it('writes the searchable fields as field: value lines in schema order', () => {
    const item = {
      tags: ['small', 'blue'],
      description: 'A  small\n\nwidget\u0000 for   the kitchen.',
      name: 'Widget',
      price: 12.5,
      category: 'tools',
      inner: { tags: ['a', 'b'], level: 2 },
    };
    expect(tableRowToChunk(item, schema)).toEqual({
      content: 'name: Widget\ndescription: A small widget for the kitchen.\nprice: 12.5\ntags: ["small","blue"]',
      metadata: { category: 'tools', inner: { tags: ['a', 'b'], level: 2 }, price: 12.5 },
    });
  });

  it('keeps nested metadata as it is, by reference to the same values', () => {
    const inner = { tags: ['x'], deep: { list: [1, { k: null }] } };
    const chunk = tableRowToChunk({ name: 'n', inner }, schema);
    expect(chunk?.metadata).toEqual({ inner });
    expect(chunk?.metadata.inner).toStrictEqual(inner);
  });

  it('leaves out missing, null and empty values; JSON-encodes booleans and objects', () => {
    const chunk = tableRowToChunk(
      { name: '', description: null, price: false, tags: { a: 1 } },
      { searchableFields: ['name', 'description', 'price', 'tags', 'absent'], metadataFields: ['absent', 'name'] },
    );
    expect(chunk).toEqual({ content: 'price: false\ntags: {"a":1}', metadata: { name: '' } });
  });

  it('is null when the row has no searchable text', () => {
    expect(tableRowToChunk({ name: '  ', category: 'tools' }, schema)).toBeNull();
    expect(tableRowToChunk({ category: 'tools' }, schema)).toBeNull();
    expect(tableRowToChunk({ name: 'x' }, { searchableFields: [], metadataFields: ['name'] })).toBeNull();
  });

  it('ignores inherited members', () => {
    const item = Object.create({ name: 'inherited' }) as Record<string, unknown>;
    item.description = 'own';
    expect(tableRowToChunk(item, schema)?.content).toBe('description: own');
  });
});
