/** Small statistics and timing helpers. */
import { performance } from 'node:perf_hooks';

/** Milliseconds on a monotonic clock shared by everything in this process. */
export function now(): number {
  return performance.now();
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The value below which `p` percent of the values fall (nearest rank); NaN for no values. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * `items` in order on even turns and backwards on odd ones: measurements that take turns this way give a
 * machine that speeds up or slows down during the run to no side in particular.
 */
export function inTurn<T>(items: readonly T[], turn: number): readonly T[] {
  return turn % 2 === 0 ? items : [...items].reverse();
}

/** `a` against `b` taken in turns: the ratio of their medians, and the lowest and highest ratio within one turn. */
export interface TurnRatios {
  ratio: number;
  min: number;
  max: number;
}

/**
 * The ratio of `a`'s median to `b`'s, and its range over turns: `a[i] / b[i]` of each turn `i` (both measured in
 * it, next to each other), so a machine that drifts between turns widens the range, not the ratio. NaN for none.
 */
export function turnRatios(a: readonly number[], b: readonly number[]): TurnRatios {
  if (a.length !== b.length)
    throw new Error(`turnRatios needs one figure per side and turn, got ${a.length} against ${b.length}`);
  const perTurn = a.map((value, i) => value / b[i]!);
  return {
    ratio: median(a) / median(b),
    min: perTurn.length === 0 ? Number.NaN : Math.min(...perTurn),
    max: perTurn.length === 0 ? Number.NaN : Math.max(...perTurn),
  };
}

/** `a` − `b` taken in pairs: the median of the pairs' differences, its interquartile range, and how many pairs. */
export interface PairedDifference {
  median: number;
  q1: number;
  q3: number;
  pairs: number;
}

/**
 * `a[i] − b[i]` of each pair `i` (both measured in it, next to each other), read by its median and quartiles
 * (nearest rank): a machine that drifts between pairs moves both sides of a pair alike, so it widens the quartiles
 * less than it moves either side's median. Pairs with a side not finite are left out. NaN for none.
 */
export function pairedDifference(a: readonly number[], b: readonly number[]): PairedDifference {
  if (a.length !== b.length)
    throw new Error(
      `pairedDifference needs one figure per side and pair, got ${a.length} against ${b.length}`,
    );
  const differences = a.map((value, i) => value - b[i]!).filter(Number.isFinite);
  return {
    median: median(differences),
    q1: percentile(differences, 25),
    q3: percentile(differences, 75),
    pairs: differences.length,
  };
}

export function mean(values: readonly number[]): number {
  return values.length === 0 ? Number.NaN : values.reduce((sum, v) => sum + v, 0) / values.length;
}

export function max(values: readonly number[]): number {
  return values.length === 0 ? Number.NaN : values.reduce((m, v) => (v > m ? v : m), -Infinity);
}

/** Polls `condition` until it is true; false when `timeoutMs` passed first. A bench never fails on a sleep. */
export async function waitUntil(
  condition: () => boolean | Promise<boolean>,
  timeoutMs: number,
  intervalMs = 10,
): Promise<boolean> {
  const deadline = now() + timeoutMs;
  for (;;) {
    if (await condition()) return true;
    if (now() > deadline) return false;
    await sleep(intervalMs);
  }
}
