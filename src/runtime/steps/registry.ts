import type { AnyStepType } from './step-type';

/** The step types a runtime knows, by `type`. Built once per runtime from a list. */
export interface StepRegistry {
  get(type: string): AnyStepType | undefined;
  /** In registration order (the order of docs and of the JSON Schema's union). */
  list(): readonly AnyStepType[];
}

export function createStepRegistry(types: readonly AnyStepType[]): StepRegistry {
  const byType = new Map<string, AnyStepType>();
  for (const t of types) {
    if (byType.has(t.type)) throw new Error(`step type "${t.type}" is registered twice`);
    byType.set(t.type, t);
  }
  if (byType.size === 0) throw new Error('a step registry needs at least one step type');
  return {
    get: (type) => byType.get(type),
    list: () => [...byType.values()],
  };
}
