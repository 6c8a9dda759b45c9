#!/usr/bin/env node
// The `parley` command. Parley runs its TypeScript sources through tsx (no build step).
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
await main();
