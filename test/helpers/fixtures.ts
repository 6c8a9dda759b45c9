/** Request bodies several suites need, written once. */

/** A boolean evaluation ("Was the user helped?"), enabled, as POST /v1/transcript-evaluation takes it. */
export function helpedEvaluation(projectID: string, name = 'helped') {
  return {
    projectID,
    name,
    enabled: true,
    type: 'boolean',
    prompt: 'Was the user helped?',
    truePrompt: 'helped',
    falsePrompt: 'not helped',
  };
}

/** An agent program whose one flow says `before`, waits `ms`, then says `after`: a turn that stays open. */
export function pausingProgram(name: string, opts: { before: string; after: string; ms?: number }) {
  return {
    name,
    startFlow: 'main',
    flows: [
      {
        id: 'main',
        name: 'Main',
        start: 'a',
        steps: [
          { id: 'a', type: 'message', message: opts.before, next: 'w' },
          { id: 'w', type: 'wait', ms: opts.ms ?? 2500, next: 'b' },
          { id: 'b', type: 'message', message: opts.after },
        ],
      },
    ],
  };
}
