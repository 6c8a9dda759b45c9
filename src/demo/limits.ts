/** The bounds of `parley demo`'s options, shared by the command's checks and `seedDemo`'s. */
export const demoLimits = { days: { min: 1, max: 90, default: 30 }, seed: { max: 2 ** 32 - 1, default: 1 } } as const;
