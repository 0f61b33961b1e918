import { backoffDelayMs } from './backoff';

describe('backoffDelayMs', () => {
  const options = { baseMs: 1000, capMs: 60_000, jitter: 0 };

  it('doubles the delay with each attempt', () => {
    expect([1, 2, 3, 4].map((attempt) => backoffDelayMs(attempt, options))).toEqual([1000, 2000, 4000, 8000]);
  });

  it('never goes past the cap', () => {
    expect(backoffDelayMs(30, options)).toBe(60_000);
    expect(backoffDelayMs(30, { ...options, jitter: 0.5 }, () => 1)).toBe(60_000);
  });

  it('spreads the delay by ±jitter', () => {
    const jittered = { ...options, jitter: 0.2 };
    expect(backoffDelayMs(1, jittered, () => 0)).toBe(800);
    expect(backoffDelayMs(1, jittered, () => 0.5)).toBe(1000);
    expect(backoffDelayMs(1, jittered, () => 0.999999)).toBe(1200);
  });
});
