import { resolveOutboxOptions } from './outbox-options';
import { relayPolicy } from './relay-policy';

const policyOf = (...args: Parameters<typeof resolveOutboxOptions>) =>
  relayPolicy(resolveOutboxOptions(...args).options);

describe('relayPolicy', () => {
  it('has every mechanism on by default: two lanes on a pool of 8 or more, claims growing to 500', () => {
    expect(policyOf({})).toEqual({
      lanes: 'auto',
      claimGrowth: { max: 500 },
      leanClaim: true,
      namedStatements: true,
      unguardedClosings: true,
      optimisticBatches: true,
      wakeUpGapMs: 2,
      oneWrite: true,
      leanTransactions: true,
      pacedScans: true,
      fairShares: true,
      claimPositions: { fullScanMs: 60_000, settleMs: 250, startScanMs: 600_000 },
      claimFloor: { marginMs: 600_000, refreshMs: 5_000, fullScanMs: 60_000 },
      horizonVacuums: { heldEveryMs: 60_000 },
      leaseProbesByKey: true,
    });
  });

  it('follows the options: relay.concurrency, relay.maxBatchSize, preparedStatements', () => {
    expect(
      policyOf({ preparedStatements: false, relay: { concurrency: 3, batchSize: 50, maxBatchSize: 50 } }),
    ).toMatchObject({ lanes: 3, claimGrowth: null, namedStatements: false });
  });

  it('takes the switches an app provides over what the options give', () => {
    const { options } = resolveOutboxOptions({});
    expect(
      relayPolicy(options, { leanClaim: false, unguardedClosings: false, lanes: 1, wakeUpGapMs: 0 }),
    ).toMatchObject({
      lanes: 1,
      wakeUpGapMs: 0,
      leanClaim: false,
      unguardedClosings: false,
      claimGrowth: { max: 500 },
    });
  });
});
