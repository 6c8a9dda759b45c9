import { consoleBench } from './console.bench';
import { httpBench } from './http.bench';
import { kbBench } from './kb.bench';
import type { BenchSuite } from './lib';
import { runtimeBench } from './runtime.bench';
import { transcriptsBench } from './transcripts.bench';
import { usageBench } from './usage.bench';

/** Every benchmark suite, in the order `npm run bench` runs them. Add yours here. */
export const suites: BenchSuite[] = [httpBench, usageBench, transcriptsBench, runtimeBench, kbBench, consoleBench];
