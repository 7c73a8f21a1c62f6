// Figures over a bench's rounds.

/** The middle value (the upper of the two middles for an even count); the input is not reordered. */
export const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
