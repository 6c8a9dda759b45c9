import { parse } from 'graphql';
import { createSchema, createYoga } from 'graphql-yoga';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/env';
import { fieldAfterFragment, useCompiledExecution } from '../../src/graphql/plugins/compiled-execution';
import { createLogger } from '../../src/lib/logger';

/**
 * graphql-jit (useCompiledExecution) against the executor it replaces, on a schema made to fail in
 * every way graphql-js reports: the two Yoga instances must answer with the same bytes. The
 * application's own schema is compared over HTTP, on each database, in executors.test.ts.
 */
let touches = 0;

const schema = createSchema({
  typeDefs: /* GraphQL */ `
    interface Node { id: ID! bad: String }
    type A implements Node { id: ID! bad: String items: [Item] strictItems: [Item!] nn: Item! }
    type B implements Node { id: ID! bad: String other: String }
    type Item { n: Int bad: String badAsync: String nnBad: String! when: Int }
    enum Color { RED GREEN }
    input Filter { min: Int! color: Color tags: [String!] }
    type Query {
      a: A
      nodes: [Node]
      bad: String
      badAsync: String
      nnBad: String!
      nnBadSync: String!
      odd: String
      oddObject: String
      oddNumber: String!
      list: [Int!]
      echo(filter: Filter, color: Color, n: Int, ids: [ID!]): String
    }
    type Mutation { touch(n: Int!): Int bad: String nnBad: Int! }
    type Tick { i: Int! bad: String badAsync: String nn: String! nnSync: String! when: Int items: [Item!] }
    type Subscription {
      ticks(n: Int!, from: Int = 0): Tick
      strictTicks(n: Int!): Tick!
      refused(how: String!): Tick
      failing(after: Int!): Tick
    }
  `,
  resolvers: {
    Node: { __resolveType: (v: { kind: string }) => v.kind },
    Query: {
      a: () => ({ id: '1' }),
      nodes: () => [
        { kind: 'A', id: '1' },
        { kind: 'B', id: '2' },
      ],
      bad: () => {
        throw new Error('root bad');
      },
      badAsync: async () => {
        throw new Error('root bad async');
      },
      nnBad: async () => {
        throw new Error('root nnBad');
      },
      nnBadSync: () => {
        throw new Error('root nnBad sync');
      },
      odd: () => {
        throw 'a string';
      },
      oddObject: async () => {
        throw { message: 'an object', name: 'Custom' };
      },
      oddNumber: () => {
        throw 42;
      },
      list: () => [1, null, 3],
      echo: (_: unknown, args: unknown) => JSON.stringify(args),
    },
    Mutation: {
      touch: (_: unknown, { n }: { n: number }) => {
        touches++;
        return n + 1;
      },
      bad: async () => {
        throw new Error('mutation bad');
      },
      nnBad: async () => {
        throw new Error('mutation nnBad');
      },
    },
    Subscription: {
      ticks: {
        subscribe: (_: unknown, { n, from }: { n: number; from: number }) => ticksOf(n, from),
        resolve: (tick: { i: number }) => tick,
      },
      strictTicks: {
        subscribe: (_: unknown, { n }: { n: number }) => ticksOf(n, 0),
        resolve: (tick: { i: number }) => {
          if (tick.i === 1) throw new Error('strict tick 1');
          return tick;
        },
      },
      refused: {
        subscribe: async (_: unknown, { how }: { how: string }) => {
          if (how === 'throw') throw new Error('not allowed');
          if (how === 'error') return new Error('returned an error');
          if (how === 'number') return 5;
          if (how === 'object') {
            class Deep {
              deeper = { deepest: { n: [1, [2, [3]]], at: new Date(0) } };
            }
            const object: Record<string, unknown> = { i: 1, list: [1, 'two', null], f() {}, deep: new Deep(), e: [] };
            object.self = object;
            return object;
          }
          if (how === 'array') return [{}, [], () => {}];
          return null;
        },
      },
      failing: {
        subscribe: async function* (_: unknown, { after }: { after: number }) {
          for (let i = 0; i < after; i++) yield { i };
          throw new Error('the source failed');
        },
        resolve: (tick: { i: number }) => tick,
      },
    },
    Tick: {
      bad: ({ i }: { i: number }) => (i === 1 ? new Error(`tick bad ${i}`) : 'ok'),
      badAsync: async ({ i }: { i: number }) => {
        if (i !== 0) throw new Error(`tick async ${i}`);
        return 'ok';
      },
      nn: async ({ i }: { i: number }) => {
        if (i === 2) throw new Error(`tick nn ${i}`);
        return 'x';
      },
      nnSync: () => {
        throw new Error('tick nnSync');
      },
      when: ({ i }: { i: number }) => (i === 1 ? 'not an int' : i),
      items: ({ i }: { i: number }) => [{ n: i }, { n: 2 }],
    },
    A: {
      bad: () => {
        throw new Error('A.bad');
      },
      items: () => [1, 2, 3].map((n) => ({ n })),
      strictItems: () => [{ n: 1 }, { n: 2 }],
      nn: () => ({ n: 0 }),
    },
    B: {
      bad: async () => {
        throw new Error('B.bad');
      },
      other: () => new Error('B.other returned an error'),
    },
    Item: {
      bad: ({ n }: { n: number }) => (n === 2 ? new Error(`item bad ${n}`) : 'ok'),
      badAsync: async ({ n }: { n: number }) => {
        if (n !== 1) throw new Error(`item async ${n}`);
        return 'ok';
      },
      nnBad: ({ n }: { n: number }) => {
        if (n !== 2) throw new Error(`item nnBad ${n}`);
        return 'x';
      },
      when: ({ n }: { n: number }) => (n === 2 ? 'not an int' : n),
    },
  },
});

async function* ticksOf(n: number, from: number) {
  for (let i = from; i < from + n; i++) yield { i };
}

const logger = createLogger('silent');
const plain = createYoga({ schema, logging: false, maskedErrors: false });
const jit = createYoga({ schema, logging: false, maskedErrors: false, plugins: [useCompiledExecution(logger)] });

async function answer(yoga: typeof plain, query: string, variables?: Record<string, unknown>) {
  const response = await yoga.fetch('http://localhost/graphql', {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ query, variables }),
  });
  return { status: response.status, body: await response.text() };
}

/** A subscription over SSE (graphql-sse's distinct connections mode): the status and the whole body. */
async function stream(yoga: typeof plain, query: string, variables?: Record<string, unknown>) {
  const response = await yoga.fetch('http://localhost/graphql', {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ query, variables }),
  });
  return { status: response.status, body: await response.text() };
}

/** The results of a subscription's events (the `next` events' data). */
function resultsOf(body: string) {
  return body
    .split('\n\n')
    .filter((e) => e.startsWith('event: next'))
    .map((e) => JSON.parse(e.slice(e.indexOf('data: ') + 6)));
}

/** Both instances stream the same status and the same bytes; returns the results. */
async function sameStream(query: string, variables?: Record<string, unknown>) {
  const [a, b] = [await stream(jit, query, variables), await stream(plain, query, variables)];
  expect(a).toEqual(b);
  return { status: b.status, body: b.body, results: resultsOf(b.body) };
}

/** Both instances answer with the same status and the same bytes; returns the parsed body. */
async function same(query: string, variables?: Record<string, unknown>) {
  const [a, b] = [await answer(jit, query, variables), await answer(plain, query, variables)];
  expect(a).toEqual(b);
  return JSON.parse(b.body);
}

describe('compiled execution answers as graphql-js does', () => {
  it('is on unless GRAPHQL_JIT=false', () => {
    expect(loadConfig({}).GRAPHQL_JIT).toBe(true);
    expect(loadConfig({ GRAPHQL_JIT: 'false' }).GRAPHQL_JIT).toBe(false);
    expect(() => loadConfig({ GRAPHQL_JIT: 'sometimes' })).toThrow(/GRAPHQL_JIT/);
  });

  it('locates resolver errors in list items, nested fields, fragments and aliases', async () => {
    const items = await same('{ a { items { n bad } } }');
    expect(items.errors[0].locations).toEqual([{ line: 1, column: 17 }]);
    expect(items.errors[0].path).toEqual(['a', 'items', 1, 'bad']);
    await same('{ a { items { n badAsync bad } } }');
    await same('{ a { items { when } } }');
    await same('{ x: bad, y: bad, a { ...F } } fragment F on A { bad z: bad }');
    const merged = await same('{ a { bad ... on A { bad } ...G } } fragment G on A { bad }');
    expect(merged.errors[0].locations).toHaveLength(3);
    await same('{ a { ...G ... on A { ...G bad } } } fragment G on A { bad }');
    await same(`{
      a {
        items {
          ... on Item { renamed: bad }
          renamed: bad
        }
      }
    }`);
  });

  it('follows the runtime type of an interface', async () => {
    await same('{ nodes { id ... on A { bad } ... on B { bad other } } }');
    await same('{ nodes { ...N ... on B { bad } } } fragment N on Node { bad }');
    await same('{ nodes { ... on B { ...N } ... on A { id ...N } } } fragment N on Node { bad }');
  });

  it('bubbles nulls from non-null positions and orders the errors as graphql-js does', async () => {
    await same('{ a { items { nnBad } } }');
    await same('{ a { strictItems { n nnBad } } }');
    const nested = await same('{ a { nn { n nnBad } } bad }');
    expect(nested.errors.map((e: { path: string[] }) => e.path.join('.'))).toEqual(['a.nn.nnBad', 'bad']);
    await same('{ bad a { nn { nnBad } } badAsync }');
    await same('{ list }');
    const root = await same('{ badAsync nnBad }');
    expect(root.data).toBeNull();
  });

  it('differs in one way: errors of the fields after a non-null field that failed synchronously', async () => {
    // graphql-js stops executing a selection set when a non-null field throws synchronously (its
    // later fields never run); graphql-jit runs them and reports their errors as well. The data
    // and the errors graphql-js gives are the same; graphql-jit lists more after them.
    const query = '{ bad nnBadSync badAsync }';
    const a = JSON.parse((await answer(jit, query)).body);
    const b = JSON.parse((await answer(plain, query)).body);
    expect(a.data).toEqual(b.data);
    expect(a.errors.slice(0, b.errors.length)).toEqual(b.errors);
    expect(a.errors.map((e: { path: string[] }) => e.path[0])).toEqual(['bad', 'nnBadSync', 'badAsync']);
  });

  it('words errors of thrown non-Errors and returned Errors as the replaced executor does', async () => {
    await same('{ odd }');
    await same('{ oddObject }');
    await same('{ oddNumber }');
    await same('{ odd oddObject a { bad } }');
    await same('{ nodes { ... on B { other } } }');
  });

  it('reads @skip and @include with the variables', async () => {
    for (const s of [true, false]) {
      await same('query ($s: Boolean!) { bad bad @skip(if: $s) }', { s });
      await same('query ($s: Boolean!) { a { ... @include(if: $s) { bad } bad } }', { s });
      await same('query ($s: Boolean = true) { a { ...F @skip(if: $s) bad } } fragment F on A { bad }', { s });
    }
    await same('query ($s: Boolean = true) { a { ...F @skip(if: $s) bad } } fragment F on A { bad }');
  });

  it('refuses variables with graphql-js messages', async () => {
    const q = 'query ($f: Filter, $c: Color, $n: Int, $ids: [ID!]) { echo(filter: $f, color: $c, n: $n, ids: $ids) }';
    const ok = await same(q, { f: { min: 1, color: 'RED', tags: 'one' }, c: 'GREEN', n: 3, ids: 7 });
    expect(JSON.parse(ok.data.echo)).toEqual({
      filter: { min: 1, color: 'RED', tags: ['one'] },
      color: 'GREEN',
      n: 3,
      ids: ['7'],
    });
    await same(q, { c: 'PURPLE' });
    await same(q, { f: { color: 'RED' } });
    await same(q, { f: { min: 1, extra: true } });
    await same(q, { f: { min: 'one' } });
    await same(q, { f: { min: null } });
    await same(q, { f: 'not an object' });
    await same(q, { n: 2 ** 31 });
    await same(q, { n: 1.5 });
    await same(q, { ids: [1, null] });
    await same(q, { c: 'RED', n: 'x', f: { min: 'y' } });
    await same('query ($n: Int!) { echo(n: $n) }', {});
    await same('query ($n: Int!) { echo(n: $n) }', { n: null });
    await same('query ($id: ID!) { echo(ids: [$id]) }', { id: 12.5 });
  });

  it('runs mutations once and answers their errors alike', async () => {
    const touched = await same('mutation { touch(n: 1) bad }');
    expect(touched.data.touch).toBe(2);
    // After a non-null mutation field fails, the fields after it do not run.
    touches = 0;
    await same('mutation { bad nnBad touch(n: 2) }');
    expect(touches).toBe(0);
    await same('mutation { touch(n: 1) nnBad second: touch(n: 2) }');
    expect(touches).toBe(2);
    await same('mutation { nnBad }');
    await same('mutation ($n: Int!) { touch(n: $n) }', { n: 'one' });
  });

  it('executes subscription events alike: failing fields, non-null errors, lists, fragments', async () => {
    const plainTicks = await sameStream('subscription { ticks(n: 3) { i bad when } }');
    expect(plainTicks.results).toHaveLength(3);
    expect(plainTicks.results[1].errors.map((e: { path: unknown[] }) => e.path)).toEqual([
      ['ticks', 'bad'],
      ['ticks', 'when'],
    ]);
    expect(plainTicks.results[1].errors[0].locations).toEqual([{ line: 1, column: 32 }]);
    const nn = await sameStream('subscription { ticks(n: 3) { i bad nn } }');
    expect(nn.results[2]).toMatchObject({ data: { ticks: null } });
    await sameStream('subscription { ticks(n: 3) { i items { n bad } ...T } } fragment T on Tick { x: bad badAsync }');
    const strict = await sameStream('subscription { strictTicks(n: 3) { i } }');
    expect(strict.results[1]).toMatchObject({ data: null, errors: [{ message: 'strict tick 1' }] });
    await sameStream('subscription { renamed: ticks(n: 2) { i badAsync } }');
  });

  it('reads the variables of a subscription as graphql-js does, and refuses them alike', async () => {
    const q = 'subscription ($n: Int!, $from: Int, $s: Boolean!) { ticks(n: $n, from: $from) { i bad @skip(if: $s) } }';
    for (const s of [true, false]) {
      const ok = await sameStream(q, { n: 2, from: 1, s });
      expect(ok.results.map((r: { data: { ticks: { i: number } } }) => r.data.ticks.i)).toEqual([1, 2]);
    }
    await sameStream(q, { n: 2, s: true });
    await sameStream(q, { n: 'two', s: true });
    await sameStream(q, { s: true });
    await sameStream(q, { n: 2, from: 1.5, s: false });
  });

  it('answers a subscription that cannot start, or whose source fails, alike', async () => {
    for (const how of ['throw', 'error', 'number', 'object', 'array', 'null']) {
      await sameStream('subscription ($how: String!) { refused(how: $how) { i } }', { how });
    }
    const failing = await sameStream('subscription { failing(after: 2) { i bad } }');
    expect(failing.results).toHaveLength(3);
    expect(failing.results[2].errors[0]).toMatchObject({
      message: 'the source failed',
      locations: [{ line: 1, column: 1 }],
    });
  });

  it('executes subscription events compiled (the one difference of queries shows)', async () => {
    // As for queries: a non-null field that fails synchronously, then a failing field after it.
    // graphql-js stops the selection set at the first; graphql-jit runs the second and reports it.
    const query = 'subscription { ticks(n: 2) { nnSync bad } }';
    const a = resultsOf((await stream(jit, query)).body);
    const b = resultsOf((await stream(plain, query)).body);
    expect(a.map((r) => r.data)).toEqual(b.map((r) => r.data));
    expect(b[1].errors.map((e: { path: string[] }) => e.path.join('.'))).toEqual(['ticks.nnSync']);
    expect(a[1].errors.map((e: { path: string[] }) => e.path.join('.'))).toEqual(['ticks.nnSync', 'ticks.bad']);
  });

  it('keeps the member order of the document where a fragment comes before a field (graphql-js runs it)', async () => {
    // graphql-jit would list a selection set's own fields before its fragments' members.
    const spreadFirst = await same('{ a { ...F id } } fragment F on A { nn { n } }');
    expect(Object.keys(spreadFirst.data.a)).toEqual(['nn', 'id']);
    const inlineFirst = await same('{ a { ... on A { nn { n } } id } }');
    expect(Object.keys(inlineFirst.data.a)).toEqual(['nn', 'id']);
    const inFragment = await same('{ a { ...G } } fragment G on A { ...F id } fragment F on A { nn { n } }');
    expect(Object.keys(inFragment.data.a)).toEqual(['nn', 'id']);
    await sameStream('subscription { ticks(n: 2) { ... on Tick { nn } i } }');
    expect(fieldAfterFragment(parse('{ a { id ...F } } fragment F on A { nn { n } }'))).toBe(false);
    expect(fieldAfterFragment(parse('{ a { ... on A { id } nn { n } } }'))).toBe(true);
  });

  it('differs in one more way: errors of async non-null bubbling, listed in document order', async () => {
    const bubbling = 'subscription { ticks(n: 3) { i nn badAsync } }';
    const ea = resultsOf((await stream(jit, bubbling)).body)[2].errors;
    const eb = resultsOf((await stream(plain, bubbling)).body)[2].errors;
    expect(eb.map((e: { message: string }) => e.message)).toEqual(['tick async 2', 'tick nn 2']);
    expect(ea).toEqual([eb[1], eb[0]]);
  });
});
