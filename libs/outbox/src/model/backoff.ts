/**
 * Delay before the attempt after `attempt` (1-based) failed: `baseMs * 2^(attempt-1)`, capped at `capMs`,
 * spread by ±`jitter` so that a burst of failures does not retry in lockstep.
 */
export function backoffDelayMs(
  attempt: number,
  options: Required<OutboxBackoffOptions>,
  random: () => number = Math.random,
): number {
  const exponential = options.baseMs * 2 ** Math.max(0, attempt - 1);
  const capped = Math.min(options.capMs, exponential);
  const spread = capped * options.jitter * (2 * random() - 1);
  return Math.max(0, Math.round(Math.min(options.capMs, capped + spread)));
}

/** Exponential backoff between attempts of one delivery. */
export interface OutboxBackoffOptions {
  /** Delay before the second attempt, in ms. Default: `1000`. */
  baseMs?: number;
  /** Longest delay between two attempts, in ms. Default: `300000` (5 minutes). */
  capMs?: number;
  /** Random spread applied to each delay, as a fraction (0 to 1). Default: `0.2` (±20%). */
  jitter?: number;
}
