import { describe, expect, it } from 'vitest';
import { eventRowOf } from '../../src/analytics/usage-event-writer';

/**
 * SQLite's per-row events insert binds only the columns an event's kind can set; the rest must hold
 * the column's default ('' or NULL), or the row goes in with every column. The stored rows of
 * every kind through this path are compared with the JSON path's in usage-event-writer.test.ts;
 * this holds the choice of text itself.
 */
describe('eventRowOf', () => {
  const full = 'FULL';
  const rowOf = eventRowOf('INSERT INTO "UsageEvent"', 'TAIL', full);
  // id, projectId, environmentId, kind, occurredAt, hour, userId, type, model, diagramId, nodeId,
  // subjectId, name, quantity, success, idempotencyKey
  const row = (
    kind: string,
    dims: Partial<Record<'type' | 'model' | 'diagramId' | 'nodeId' | 'subjectId' | 'name', string>>,
    success: number | null = null,
  ) => [
    'id',
    'p',
    'e',
    kind,
    '2026-01-01T00:00:00.000+00:00',
    1,
    'u',
    dims.type ?? '',
    dims.model ?? '',
    dims.diagramId ?? '',
    dims.nodeId ?? '',
    dims.subjectId ?? '',
    dims.name ?? '',
    7,
    success,
    'k',
  ];

  it('leaves out the columns the kind cannot set when they hold their default', () => {
    const interaction = rowOf(row('interaction', { type: 'text' }));
    expect(interaction.text).toBe(
      'INSERT INTO "UsageEvent" ("id", "projectId", "environmentId", "kind", "occurredAt", "hour", "userId", "type", "quantity", "idempotencyKey", "recordedAt") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) TAIL',
    );
    expect(interaction.values).toEqual([
      'id',
      'p',
      'e',
      'interaction',
      '2026-01-01T00:00:00.000+00:00',
      1,
      'u',
      'text',
      7,
      'k',
    ]);
    const call = rowOf(row('function_call', { subjectId: 'f', name: '' }, 0));
    expect(call.text).toContain('"subjectId", "name", "quantity", "success", "idempotencyKey", "recordedAt"');
    expect(call.values).toEqual([
      'id',
      'p',
      'e',
      'function_call',
      '2026-01-01T00:00:00.000+00:00',
      1,
      'u',
      'f',
      '',
      7,
      0,
      'k',
    ]);
    const credit = rowOf(row('credit', { type: 'llm-input', model: 'm', diagramId: '', nodeId: 'n' }));
    expect(credit.values).toEqual([
      'id',
      'p',
      'e',
      'credit',
      '2026-01-01T00:00:00.000+00:00',
      1,
      'u',
      'llm-input',
      'm',
      '',
      'n',
      7,
      'k',
    ]);
  });

  it('writes every column when a left-out column does not hold its default, or the kind is unknown', () => {
    for (const values of [
      row('interaction', { type: 'text', subjectId: 'x' }),
      row('intent', { subjectId: 'refund', type: 'odd' }),
      row('kb_document', { subjectId: 'd' }, 1),
      row('credit', { type: 'llm-input', model: 'm', name: 'n' }),
      row('no_such_kind', {}),
    ]) {
      const one = rowOf(values);
      expect(one.text).toBe(full);
      expect(one.values).toBe(values);
    }
  });
});
