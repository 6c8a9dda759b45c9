import { z } from 'zod';
import type { Logger } from '../lib/logger';

/** Price of one model, per million tokens, in the table's currency (USD for the defaults). */
export const modelPriceSchema = z.strictObject({
  input: z.number().min(0),
  output: z.number().min(0).default(0),
});
export type ModelPrice = z.infer<typeof modelPriceSchema>;

/** Model name → price. The key `*` prices every model the table does not name. */
export const priceTableSchema = z.record(z.string().min(1), modelPriceSchema);
export type PriceTable = Record<string, ModelPrice>;

/**
 * OpenAI's list prices (USD per million tokens, standard tier) when this table was written. They
 * change: operators override or extend them with LLM_PRICES / LLM_PRICES_FILE (docs/models.md).
 */
export const DEFAULT_PRICES: PriceTable = {
  'gpt-4o': { input: 2.5, output: 10 },
  'gpt-4o-mini': { input: 0.15, output: 0.6 },
  'gpt-4.1': { input: 2, output: 8 },
  'gpt-4.1-mini': { input: 0.4, output: 1.6 },
  'gpt-4.1-nano': { input: 0.1, output: 0.4 },
  'text-embedding-3-small': { input: 0.02, output: 0 },
  'text-embedding-3-large': { input: 0.13, output: 0 },
};

/** The built-in provider runs in-process: it is free, and known to be. */
export const BUILTIN_MODEL = 'builtin';

/** Parses a price table from JSON text; the error says what is wrong and where it came from. */
export function parsePriceTable(json: string, source: string): PriceTable {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    throw new Error(`${source} is not valid JSON`);
  }
  const parsed = priceTableSchema.safeParse(raw);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    const where = first?.path.length ? ` at "${first.path.join('.')}"` : '';
    throw new Error(
      `${source} is not a price table${where}: ${first?.message ?? 'invalid'} (expected {"model": {"input": <per 1M tokens>, "output": <per 1M tokens>}})`,
    );
  }
  return parsed.data;
}

/** Hosted APIs answer with dated snapshots (`gpt-4o-mini-2024-07-18`) of the names priced here. */
const DATED_SNAPSHOT = /-\d{4}-\d{2}-\d{2}$/;

export interface CostCalculator {
  /** Cost of a call; 0 (and one warning per model) when the model has no price. */
  costOf(model: string, inputTokens: number, outputTokens: number): number;
  priceOf(model: string): ModelPrice | undefined;
}

export function createCostCalculator(opts: { prices: PriceTable; logger?: Logger }): CostCalculator {
  const prices = opts.prices;
  // Per instance, not per process: "logged once" means once per model for this provider.
  const warned = new Set<string>();

  function priceOf(model: string): ModelPrice | undefined {
    if (model === BUILTIN_MODEL) return { input: 0, output: 0 };
    return prices[model] ?? prices[model.replace(DATED_SNAPSHOT, '')] ?? prices['*'];
  }

  return {
    priceOf,
    costOf(model, inputTokens, outputTokens) {
      const price = priceOf(model);
      if (!price) {
        if (!warned.has(model)) {
          warned.add(model);
          opts.logger?.warn(
            { model },
            'no price for this model: its calls cost 0 (set LLM_PRICES or LLM_PRICES_FILE, see docs/models.md)',
          );
        }
        return 0;
      }
      const cost = (inputTokens * price.input + outputTokens * price.output) / 1_000_000;
      // Twelve decimals: exact enough for one token of the cheapest model, and free of float noise.
      return Math.round(cost * 1e12) / 1e12;
    },
  };
}
