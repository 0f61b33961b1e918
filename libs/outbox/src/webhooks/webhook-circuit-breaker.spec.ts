import { WebhookCircuitBreaker } from './webhook-circuit-breaker';

describe('WebhookCircuitBreaker', () => {
  let now = 0;
  const breaker = () => new WebhookCircuitBreaker(3, 1000, 200, () => now);
  beforeEach(() => {
    now = 0;
  });

  it('opens after N consecutive failures, holds requests back for the cool-down, then lets one probe through', () => {
    const b = breaker();
    for (let i = 0; i < 3; i++) b.record(b.admit() as { probe: boolean }, true);
    expect(b.snapshot().state).toBe('open');
    now = 400;
    expect(b.admit()).toEqual({ admitted: false, retryAfterMs: 600 });
    now = 1000;
    expect(b.admit()).toEqual({ admitted: true, probe: true });
    expect(b.snapshot().state).toBe('halfOpen');
    expect(b.admit()).toMatchObject({ admitted: false });
    b.record({ probe: true }, false);
    expect(b.snapshot()).toMatchObject({ state: 'closed', consecutiveFailures: 0 });
    expect(b.admit()).toEqual({ admitted: true, probe: false });
  });

  it('opens again when the probe fails, and lets another probe go if one never reports', () => {
    const b = breaker();
    for (let i = 0; i < 3; i++) b.record({ probe: false }, true);
    now = 1000;
    b.record(b.admit() as { probe: boolean }, true);
    expect(b.snapshot()).toMatchObject({ state: 'open', probeAt: new Date(2000) });
    now = 2000;
    expect(b.admit()).toEqual({ admitted: true, probe: true });
    now = 2201;
    expect(b.admit()).toEqual({ admitted: true, probe: true });
  });

  it('resets the count on a success', () => {
    const b = breaker();
    b.record({ probe: false }, true);
    b.record({ probe: false }, true);
    b.record({ probe: false }, false);
    b.record({ probe: false }, true);
    expect(b.snapshot()).toMatchObject({ state: 'closed', consecutiveFailures: 1 });
  });
});
