import { INBOX_DEFAULTS, resolveInboxOptions } from './outbox-inbox-options';

describe('resolveInboxOptions', () => {
  it('merges the defaults once', () => {
    expect(resolveInboxOptions({ redelivery: { baseMs: 50 } })).toEqual({
      options: { ...INBOX_DEFAULTS, redelivery: { ...INBOX_DEFAULTS.redelivery, baseMs: 50 } },
      problems: [],
    });
  });

  it('lists every problem, each naming its option', () => {
    const { problems } = resolveInboxOptions({
      maxDeliveries: 0,
      redelivery: { capMs: -1 },
      isGlobal: 'yes' as never,
    });
    expect(problems).toHaveLength(3);
    expect(problems[0]).toContain('maxDeliveries');
    expect(problems[1]).toContain('OutboxInboxModule redelivery.capMs');
    expect(problems[2]).toContain('isGlobal');
  });
});
