import { resolveOutboxOptions } from '../options/outbox-options';
import { resolveExternalConsumer } from './external-consumer-settings';

describe('resolveExternalConsumer', () => {
  const options = resolveOutboxOptions({}).options;
  const resolve = (input: Record<string, unknown>, problems: string[]) =>
    resolveExternalConsumer(
      { name: 'orders', events: ['crm.*'], ...input },
      'brokers[0] ("orders")',
      { option: 'brokers', index: 0, seen: new Map() },
      options,
      10_000,
      problems,
    );

  it('takes concurrency and rateLimit as the registry stores them, as @OnOutboxEvent does', () => {
    const problems: string[] = [];
    const settings = resolve(
      { concurrency: { global: 20 }, rateLimit: { limit: 50, intervalMs: 1000, perTenant: true } },
      problems,
    );
    expect(problems).toEqual([]);
    expect(settings.limits).toEqual({
      concurrency: 20,
      tenantConcurrency: null,
      rateLimit: 50,
      rateIntervalMs: 1000,
      ratePerTenant: true,
      rateKey: null,
    });
  });

  it('has no limits when neither is set', () => {
    const problems: string[] = [];
    expect(resolve({}, problems).limits).toBeUndefined();
    expect(problems).toEqual([]);
  });

  it('names the entry and the field of a malformed limit, with the entry’s other problems', () => {
    const problems: string[] = [];
    const settings = resolve(
      { concurrency: { global: 0 }, rateLimit: { limit: 5 }, maxAttempts: -1 },
      problems,
    );
    expect(settings.limits).toBeUndefined();
    expect(problems).toEqual([
      expect.stringContaining('maxAttempts'),
      expect.stringContaining('concurrency.global of brokers[0] ("orders")'),
      expect.stringContaining('rateLimit.intervalMs of brokers[0] ("orders")'),
    ]);
  });
});
