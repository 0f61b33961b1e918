import { subscriptionLimits } from './subscription-limits';

describe('subscriptionLimits', () => {
  it('takes a cap and a rate as the tenant’s own limits', () => {
    expect(
      subscriptionLimits(
        { concurrency: { global: 3 }, rateLimit: { limit: 50, intervalMs: 1000 } },
        'subscription',
      ),
    ).toEqual({
      limits: {
        concurrency: null,
        tenantConcurrency: 3,
        rateLimit: 50,
        rateIntervalMs: 1000,
        ratePerTenant: true,
        rateKey: null,
      },
      problems: [],
    });
    expect(subscriptionLimits({}, 'subscription')).toEqual({ limits: undefined, problems: [] });
  });

  it('names the field of each problem, perTenant and perKey refused with what to do instead', () => {
    const { limits, problems } = subscriptionLimits(
      {
        concurrency: { global: 2, perTenant: 1 },
        rateLimit: { limit: 5, intervalMs: 0, perKey: 'aggregate' },
      },
      'subscription',
    );
    expect(limits).toBeUndefined();
    expect(problems).toEqual([
      {
        field: 'concurrency',
        message: expect.stringContaining('concurrency.perTenant of subscription must be left out'),
      },
      {
        field: 'rateLimit',
        message: expect.stringContaining('rateLimit.perKey of subscription must be left out'),
      },
    ]);
    expect(subscriptionLimits({ rateLimit: { limit: 5, intervalMs: 0 } }, 'subscription').problems).toEqual([
      { field: 'rateLimit', message: expect.stringContaining('rateLimit.intervalMs of subscription') },
    ]);
  });
});
