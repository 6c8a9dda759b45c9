import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/db/schema-source';
import { createExpressionEvaluator, expressionVariables, interpolate } from '../../src/runtime/expressions';
import { extractEntity } from '../../src/runtime/nlu/entities';
import { createIntentMatcher } from '../../src/runtime/nlu/matcher';
import { programJsonSchema } from '../../src/runtime/program/schema';
import { checkProgram } from '../../src/runtime/program/validate';
import { createDefaultStepRegistry } from '../../src/runtime/steps';

/** The program format, its checks, and the pieces steps are built from (no database needed). */

const registry = createDefaultStepRegistry();

describe('the agent program format', () => {
  it('matches the committed docs/agent-program.schema.json (run `npm run agent-schema:print` after changing it)', () => {
    const committed = JSON.parse(readFileSync(join(projectRoot, 'docs/agent-program.schema.json'), 'utf8'));
    expect(committed).toEqual(programJsonSchema(registry));
  });

  it('lists every step type in the schema', () => {
    const text = JSON.stringify(programJsonSchema(registry));
    for (const type of registry.list().map((s) => s.type)) expect(text).toContain(`"const":"${type}"`);
  });

  it('accepts the example agent without problems', () => {
    const example = JSON.parse(readFileSync(join(projectRoot, 'examples/support-bot/agent.json'), 'utf8'));
    const check = checkProgram(example, registry);
    expect(check.errors).toEqual([]);
    expect(check.warnings).toEqual([]);
  });

  it('reports schema problems at their paths, including unknown step types and members', () => {
    const check = checkProgram(
      {
        name: '',
        startFlow: 'm',
        flows: [
          {
            id: 'm',
            start: 'a',
            steps: [
              { id: 'a', type: 'mesage', message: 'x' },
              { id: 'b', type: 'message', message: 'x', nxt: 'a' },
            ],
          },
        ],
        extra: 1,
      },
      registry,
    );
    expect(check.program).toBeNull();
    expect(check.errors.map((e) => e.path)).toEqual(
      expect.arrayContaining(['name', 'flows.0.steps.0.type', 'flows.0.steps.1.nxt', 'extra']),
    );
  });

  it('takes a fixed API method or a template with a variable, and refuses any other word', () => {
    const program = (method: string) => ({
      name: 'x',
      startFlow: 'main',
      variables: [{ name: 'verb' }],
      flows: [{ id: 'main', start: 'a', steps: [{ id: 'a', type: 'api', method, url: 'https://example.com/' }] }],
    });
    for (const method of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', '{verb}', ' {verb} ']) {
      expect(checkProgram(program(method), registry).errors, method).toEqual([]);
    }
    for (const method of ['get', 'FETCH', '', 'verb']) {
      const check = checkProgram(program(method), registry);
      expect(check.errors, method).toEqual([
        expect.objectContaining({
          path: 'flows.0.steps.0.method',
          message: expect.stringContaining('must be GET, POST, PUT, PATCH or DELETE, or a template with a {variable}'),
        }),
      ]);
    }
    expect(checkProgram(program('{nope}'), registry).errors).toEqual([
      expect.objectContaining({ path: 'flows.0.steps.0.method', message: 'unknown variable "nope"' }),
    ]);
  });

  it('reports unknown intents, entities, flows and triggers, and warns of flows nothing runs', () => {
    const check = checkProgram(
      {
        name: 'x',
        startFlow: 'main',
        intents: [{ name: 'hi', utterances: ['hello {who}'] }],
        triggers: [{ intent: 'bye', goTo: { flow: 'gone' } }],
        flows: [
          {
            id: 'main',
            start: 'ask',
            steps: [
              { id: 'ask', type: 'choice', buttons: [{ label: 'A', intent: 'nope', next: 'go' }] },
              { id: 'go', type: 'goto', flow: 'other', step: 'missing', next: 'cap' },
              { id: 'cap', type: 'capture', variable: 'user_id', entity: 'ghost' },
            ],
          },
          { id: 'other', start: 'o', steps: [{ id: 'o', type: 'end' }] },
          { id: 'lonely', start: 'l', steps: [{ id: 'l', type: 'end' }] },
        ],
      },
      registry,
    );
    expect(check.errors).toEqual(
      expect.arrayContaining([
        {
          severity: 'error',
          path: 'intents.0.utterances.0',
          message: "placeholder {who} is not one of the intent's entities",
        },
        { severity: 'error', path: 'triggers.0.intent', message: 'unknown intent "bye"' },
        { severity: 'error', path: 'triggers.0.goTo', message: 'unknown flow "gone"' },
        { severity: 'error', path: 'flows.0.steps.0.buttons.0.intent', message: 'unknown intent "nope"' },
        { severity: 'error', path: 'flows.0.steps.1.flow', message: 'flow "other" has no step "missing"' },
        {
          severity: 'error',
          path: 'flows.0.steps.2.variable',
          message: '"user_id" is a built-in variable and cannot be assigned',
        },
        { severity: 'error', path: 'flows.0.steps.2.entity', message: 'unknown entity "ghost"' },
      ]),
    );
    expect(check.warnings).toEqual([
      {
        severity: 'warning',
        path: 'flows.2',
        message: 'flow "lonely" is never run: no goto step or trigger leads to it',
      },
    ]);
  });
});

describe('intent matching', () => {
  const entities = new Map([['order_id', { type: 'regex' as const, pattern: '\\b\\d{5}\\b' }]]);
  const matcher = createIntentMatcher(
    [
      {
        name: 'track',
        utterances: ['where is my order', 'track my package', 'order {order_id} status'],
        entities: ['order_id'],
      },
      { name: 'refund', utterances: ['I want my money back', 'refund please', 'return an item'] },
      { name: 'greet', utterances: ['hello', 'good morning'] },
    ],
    entities,
  );

  it('ranks the intent whose utterances are most alike first, tolerating typos and filling entities', () => {
    expect(matcher.rank('where is my order')[0]).toEqual({ name: 'track', confidence: 1, entities: [] });
    const typo = matcher.rank('wher is my ordr?')[0]!;
    expect(typo.name).toBe('track');
    expect(typo.confidence).toBeGreaterThan(0.4);
    const withEntity = matcher.rank('status of order 12345')[0]!;
    expect(withEntity).toMatchObject({ name: 'track', entities: [{ name: 'order_id', value: '12345' }] });
    expect(matcher.rank('I would like a refund')[0]!.name).toBe('refund');
  });

  it('scores unrelated words low', () => {
    const best = matcher.rank('the weather in lisbon tomorrow')[0];
    expect(best?.confidence ?? 0).toBeLessThan(0.3);
  });
});

describe('entities and expressions', () => {
  const now = new Date('2026-06-15T12:00:00Z');
  it('extracts numbers, e-mail addresses, dates, patterns and list values', () => {
    expect(extractEntity('I need 3.5 kg', { type: 'number' })?.value).toBe(3.5);
    expect(extractEntity('make it seven', { type: 'number' })?.value).toBe(7);
    expect(extractEntity('mail me: a.b+c@ex.co.uk ok', { type: 'email' })?.value).toBe('a.b+c@ex.co.uk');
    expect(extractEntity('tomorrow', { type: 'date' }, now)?.value).toBe('2026-06-16');
    expect(extractEntity('on 4 July', { type: 'date' }, now)?.value).toBe('2026-07-04');
    expect(extractEntity('2026-02-30', { type: 'date' }, now)).toBeNull();
    expect(extractEntity('code AB-123!', { type: 'regex', pattern: '([A-Z]{2})-\\d+' })?.value).toBe('AB');
    expect(
      extractEntity('I live in NYC', { type: 'list', values: [{ value: 'New York', synonyms: ['nyc', 'big apple'] }] })
        ?.value,
    ).toBe('New York');
  });

  it('evaluates JSONata over the variables, finds the variables an expression reads, fills templates', async () => {
    const evaluator = createExpressionEvaluator();
    expect(await evaluator.evaluate('a + b * 2', { a: 1, b: 3 })).toBe(7);
    expect(
      await evaluator.evaluate('name = "x" and $count(items[price > 2]) = 1', {
        name: 'x',
        items: [{ price: 3 }, { price: 1 }],
      }),
    ).toBe(true);
    expect(expressionVariables('$count(items[price > limit]) + total.amount')).toEqual(['items', 'total']);
    await expect(evaluator.evaluate('($f := function($x){ $f($x) }; $f(1))', {})).rejects.toThrow();
    expect(interpolate('Hi {name}, {a.b} {missing}', { name: 'Ann', a: { b: [1] } })).toBe('Hi Ann, [1] ');
  });
});
