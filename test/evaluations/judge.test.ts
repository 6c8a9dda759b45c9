import { describe, expect, it } from 'vitest';
import { buildJudgeMessages, parseVerdict, renderConversation } from '../../src/evaluations/judge';

const boolean = { name: 'Solved', type: 'boolean', prompt: 'Solved?', truePrompt: 'yes it was', falsePrompt: 'no' };
const number = {
  name: 'Polite',
  type: 'number',
  prompt: 'How polite?',
  minimumValue: 1,
  minimumPrompt: 'rude',
  maximumValue: 5,
  maximumPrompt: 'kind',
};
const string = { name: 'Topic', type: 'string', prompt: 'Topic?' };

describe('the judge', () => {
  it('renders actions and conversation traces as lines, leaving diagnostics out', () => {
    const text = renderConversation([
      { type: 'action', data: { type: 'launch' } },
      { type: 'trace', data: { type: 'text', payload: { message: 'Hi! How can I help?' } } },
      { type: 'action', data: { type: 'text', payload: 'refund please' } },
      { type: 'trace', data: { type: 'debug', payload: { message: 'api call' } } },
      { type: 'action', data: { type: 'path-1', payload: { label: 'Yes' } } },
      { type: 'action', data: { type: 'intent', payload: { intent: { name: 'order' }, query: '' } } },
      { type: 'trace', data: { type: 'speak', payload: { type: 'message', message: 'Done.' } } },
      { type: 'trace', data: { type: 'live-agent-handoff', payload: {} } },
      { type: 'end', data: null },
    ]);
    expect(text.split('\n')).toEqual([
      '(the user started the conversation)',
      'Agent: Hi! How can I help?',
      'User: refund please',
      'User: Yes',
      'User: order',
      'Agent: Done.',
      '(the conversation was handed to a live agent)',
      '(the conversation ended)',
    ]);
    expect(renderConversation([])).toBe('(the transcript has no messages)');
  });

  it('keeps the latest lines when a conversation is too long', () => {
    const logs = Array.from({ length: 10 }, (_, i) => ({
      type: 'action',
      data: { type: 'text', payload: `message ${i}` },
    }));
    const text = renderConversation(logs, 60);
    expect(text.split('\n')[0]).toMatch(/^\(\d+ earlier lines omitted\)$/);
    expect(text.endsWith('User: message 9')).toBe(true);
  });

  it("states the evaluation's question, answer format and type rules", () => {
    const [system, user] = buildJudgeMessages(number, 'User: hi');
    expect(system!.role).toBe('system');
    expect(system!.content).toContain('{"value": <your answer>, "reason"');
    expect(system!.content).toContain('a number from 1 to 5');
    expect(system!.content).toContain('1 means: rude');
    expect(user!.content).toContain('Question: How polite?');
    expect(user!.content).toContain('<transcript>\nUser: hi\n</transcript>');
    expect(buildJudgeMessages(boolean, '')[0]!.content).toContain('Answer true when: yes it was');
  });

  it('reads a verdict from plain JSON, a fenced block, or an object inside text', () => {
    expect(parseVerdict(boolean, '{"value": true, "reason": "ok"}')).toEqual({ ok: true, value: true, reason: 'ok' });
    expect(parseVerdict(boolean, 'Verdict:\n```json\n{"value": false, "reason": "no"}\n```')).toEqual({
      ok: true,
      value: false,
      reason: 'no',
    });
    expect(parseVerdict(string, 'I think {"value": "billing", "reason": "a } in text"} overall.')).toEqual({
      ok: true,
      value: 'billing',
      reason: 'a } in text',
    });
    expect(parseVerdict(string, '{"note": 1} then {"value": "x"}')).toEqual({ ok: true, value: 'x', reason: '' });
  });

  it('parses booleans strictly and clamps numbers to the range', () => {
    expect(parseVerdict(boolean, '{"value": "TRUE"}')).toMatchObject({ ok: true, value: true });
    for (const bad of ['1', '"yes"', 'null', '0']) {
      expect(parseVerdict(boolean, `{"value": ${bad}}`).ok, bad).toBe(false);
    }
    expect(parseVerdict(number, '{"value": 9}')).toMatchObject({ value: 5 });
    expect(parseVerdict(number, '{"value": -3}')).toMatchObject({ value: 1 });
    expect(parseVerdict(number, '{"value": "3.5"}')).toMatchObject({ value: 3.5 });
    expect(parseVerdict(number, '{"value": "three"}').ok).toBe(false);
    expect(parseVerdict(string, '{"value": 42}')).toMatchObject({ value: '42' });
    expect(parseVerdict(string, 'no JSON at all')).toMatchObject({
      ok: false,
      message: expect.stringContaining('no JSON'),
    });
  });
});
