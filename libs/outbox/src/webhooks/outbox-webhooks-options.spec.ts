import { OUTBOX_WEBHOOKS_DEFAULTS, resolveOutboxWebhooksOptions } from './outbox-webhooks-options';

const core = { relay: { leaseMs: 60_000 } } as Parameters<typeof resolveOutboxWebhooksOptions>[1];

describe('resolveOutboxWebhooksOptions', () => {
  it('merges the defaults under what is given', () => {
    const { options, problems } = resolveOutboxWebhooksOptions(
      { subscriptions: { cacheTtlMs: 100, timeoutMs: undefined } },
      core,
    );
    expect(problems).toEqual([]);
    expect(options.webhooks).toEqual([]);
    expect(options.subscriptions).toEqual({ ...OUTBOX_WEBHOOKS_DEFAULTS.subscriptions, cacheTtlMs: 100 });
  });

  it('names every bad subscriptions option, and a timeout at or above relay.leaseMs', () => {
    const { problems } = resolveOutboxWebhooksOptions(
      {
        webhooks: 'none' as never,
        subscriptions: {
          enabled: 'yes' as never,
          responseBodyInErrors: 1 as never,
          allowPrivateTargets: ['10.0.0.0/99'],
          secretKeys: [{ id: 'k1', key: 'short' }],
          cacheTtlMs: 0,
          pausedRecheckMs: -1,
          timeoutMs: 60_000,
        },
      },
      core,
    );
    expect(problems).toEqual([
      expect.stringContaining('option OutboxWebhooksModule webhooks must be an array'),
      expect.stringContaining('option OutboxWebhooksModule subscriptions.enabled must be true or false'),
      expect.stringContaining('subscriptions.responseBodyInErrors must be true or false'),
      expect.stringContaining('subscriptions.allowPrivateTargets[0] must be an IP address'),
      expect.stringContaining('subscriptions.secretKeys[0].key must be 32 bytes'),
      expect.stringContaining('subscriptions.cacheTtlMs must be'),
      expect.stringContaining('subscriptions.pausedRecheckMs must be'),
      expect.stringContaining(
        'subscriptions.timeoutMs must be an integer number of ms ≥ 1 and below relay.leaseMs (60000)',
      ),
    ]);
  });

  it('refuses subscriptions that are not an object, and lists that are not arrays', () => {
    const { options, problems } = resolveOutboxWebhooksOptions(
      { subscriptions: 'on' as never, webhooks: undefined },
      core,
    );
    expect(problems).toEqual([
      expect.stringContaining('option OutboxWebhooksModule subscriptions must be an object'),
    ]);
    expect(options.subscriptions).toEqual(OUTBOX_WEBHOOKS_DEFAULTS.subscriptions);
    const bad = resolveOutboxWebhooksOptions(
      { subscriptions: { allowPrivateTargets: 'all' as never, secretKeys: 'k' as never } },
      core,
    );
    expect(bad.problems).toHaveLength(2);
    expect(bad.options.subscriptions.allowPrivateTargets).toEqual([]);
    expect(bad.options.subscriptions.secretKeys).toEqual([]);
  });
});
