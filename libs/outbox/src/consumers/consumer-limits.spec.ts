import { consumerLimits } from './consumer-limits';

describe('consumerLimits', () => {
  it('has no limits when neither option is set', () => {
    const problems: string[] = [];
    expect(consumerLimits('A#b', {}, problems)).toBeUndefined();
    expect(problems).toEqual([]);
  });

  it('stores each option where the registry keeps it, null where it is not set', () => {
    const problems: string[] = [];
    expect(
      consumerLimits(
        'A#b',
        { concurrency: { perTenant: 2 }, rateLimit: { limit: 50, intervalMs: 1000, perTenant: true } },
        problems,
      ),
    ).toEqual({
      concurrency: null,
      tenantConcurrency: 2,
      rateLimit: 50,
      rateIntervalMs: 1000,
      ratePerTenant: true,
      rateKey: null,
    });
    expect(problems).toEqual([]);
  });

  it('lists every malformed field, naming the consumer and the field, and returns no limits', () => {
    const problems: string[] = [];
    const limits = consumerLimits(
      'A#b',
      {
        concurrency: { global: 0, perTenant: 3_000_000_000 },
        rateLimit: { limit: 1.5, intervalMs: -1, perTenant: 'yes' as never },
      },
      problems,
    );
    expect(limits).toBeUndefined();
    expect(problems.map((p) => p.split(' must ')[0])).toEqual([
      'option concurrency.global of A#b',
      'option concurrency.perTenant of A#b',
      'option rateLimit.limit of A#b',
      'option rateLimit.intervalMs of A#b',
      'option rateLimit.perTenant of A#b',
    ]);
  });

  it('refuses a concurrency with no count in it', () => {
    const problems: string[] = [];
    consumerLimits('A#b', { concurrency: {} }, problems);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain('concurrency of A#b');
  });

  it('refuses a per-tenant cap above the global one: it could never apply (the two swapped?)', () => {
    const problems: string[] = [];
    expect(consumerLimits('A#b', { concurrency: { global: 2, perTenant: 5 } }, problems)).toBeUndefined();
    expect(problems).toEqual([
      'option concurrency.perTenant of A#b must be at most concurrency.global (2): one tenant never has more in flight than all tenants together, got 5',
    ]);
    expect(consumerLimits('A#b', { concurrency: { global: 2, perTenant: 2 } }, [])).toMatchObject({
      concurrency: 2,
      tenantConcurrency: 2,
    });
  });

  it('stores a per-key rate limit as the registry reads it back: the aggregate, or a payload path', () => {
    const problems: string[] = [];
    expect(
      consumerLimits('A#b', { rateLimit: { limit: 5, intervalMs: 1000, perKey: 'aggregate' } }, problems),
    ).toMatchObject({ rateLimit: 5, ratePerTenant: false, rateKey: 'aggregate' });
    expect(
      consumerLimits(
        'A#b',
        { rateLimit: { limit: 5, intervalMs: 1000, perKey: { payload: 'partner.id' } } },
        problems,
      ),
    ).toMatchObject({ rateKey: 'payload:partner.id' });
    expect(problems).toEqual([]);
  });

  it.each([
    ['an unknown key', 'tenant'],
    ['an empty path', { payload: '' }],
    ['a path with an empty field', { payload: 'partner..id' }],
    ['a path with a blank', { payload: 'partner id' }],
    ['a path too long', { payload: 'x'.repeat(201) }],
    ['another field beside payload', { payload: 'partner', aggregate: true }],
  ])('refuses %s as rateLimit.perKey', (_, perKey) => {
    const problems: string[] = [];
    const limits = consumerLimits(
      'A#b',
      { rateLimit: { limit: 5, intervalMs: 1000, perKey: perKey as never } },
      problems,
    );
    expect(limits).toBeUndefined();
    expect(problems.map((p) => p.split(' must ')[0])).toEqual(['option rateLimit.perKey of A#b']);
  });

  it('refuses perTenant beside perKey: a key is counted within its tenant already', () => {
    const problems: string[] = [];
    consumerLimits(
      'A#b',
      { rateLimit: { limit: 5, intervalMs: 1000, perKey: 'aggregate', perTenant: true } },
      problems,
    );
    expect(problems.map((p) => p.split(' must ')[0])).toEqual(['option rateLimit.perTenant of A#b']);
  });
});
