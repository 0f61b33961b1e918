/** Where the relay reads the time that decides something (a scan's age, a claim's duration); tests give their own. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

/** The process's clock. */
export const systemClock: Clock = { now: () => Date.now() };
