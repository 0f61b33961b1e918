/** Where the relay reads the time that decides something (a scan's age, a claim's duration); tests give their own. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

/** The process's clock. */
export const systemClock: Clock = { now: () => Date.now() };

/**
 * The Nest token of the relay's clock (a `Clock`): the time its planner, claims, heartbeat and lease vacuum decide
 * by. Left unprovided, the process's clock; unit specs provide their own.
 */
export const OUTBOX_CLOCK = Symbol('OUTBOX_CLOCK');
