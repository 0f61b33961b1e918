import { Logger } from '@nestjs/common';
import type { DueTenant } from '../model/due-tenant';
import { resolveOutboxOptions } from '../options/outbox-options';
import type { OutboxRelayOptions } from '../options/outbox-module-options.interface';
import { FakeClock } from '../store/outbox-store.fake';
import { SHARED_FOR_MS, TenantShares } from './tenant-shares';

const A = '00000000-0000-4000-8000-00000000000a';
const B = '00000000-0000-4000-8000-00000000000b';
const C = '00000000-0000-4000-8000-00000000000c';

const due = (tenantId: string, backlog?: boolean): DueTenant => ({
  tenantId,
  hasNew: true,
  hasDue: false,
  backlog,
});

/** Shares made from these relay options (batchSize 100 unless given), on a fake clock. */
function shares(relay: OutboxRelayOptions = {}, on = true): { shares: TenantShares; clock: FakeClock } {
  const { options, problems } = resolveOutboxOptions({ relay: { batchSize: 100, ...relay } });
  expect(problems).toEqual([]);
  const clock = new FakeClock();
  return { shares: new TenantShares(options.relay, on, clock), clock };
}

/** `tenant×share` per visit, in order (`-` for no share). */
const plan = (visits: readonly DueTenant[]): string[] =>
  visits.map((v) => `${v.tenantId.slice(-1)}×${v.share ?? '-'}`);

describe('TenantShares', () => {
  it('gives a backlogged tenant alone every lane and no cap: its claims grow as before', () => {
    const { shares: s } = shares();
    expect(plan(s.visits([due(A, true)], 2))).toEqual(['a×-', 'a×-']);
    expect(plan(s.visits([due(A)], 2))).toEqual(['a×-']);
  });

  it('visits the tenants without a backlog first, holds claims to relay.batchSize, and leaves the others a lane', () => {
    const { shares: s } = shares();
    expect(plan(s.visits([due(A, true), due(B)], 2))).toEqual(['b×100', 'a×100']);
    expect(plan(s.visits([due(A, true), due(B)], 4))).toEqual(['b×100', 'a×100', 'a×100', 'a×100']);
    expect(plan(s.visits([due(A, true), due(B)], 1))).toEqual(['b×100', 'a×100']);
  });

  it('shares relay.batchSize by weight between backlogged tenants, heaviest first, each once a round', () => {
    const { shares: s } = shares({ tenantWeights: { [B]: 3 } });
    expect(plan(s.visits([due(A, true), due(B, true)], 2))).toEqual(['b×100', 'a×33']);
    expect(plan(s.visits([due(A, true), due(B, true), due(C, true)], 4))).toEqual(['b×100', 'a×33', 'c×33']);
  });

  it('takes weights from a function, and weighs 1 (with one warning) a tenant it answers badly for', () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      const { shares: s } = shares({ tenantWeights: (tenantId) => (tenantId === A ? 4 : Number.NaN) });
      expect(s.weight(A)).toBe(4);
      expect(s.weight(B)).toBe(1);
      expect(s.weight(B)).toBe(1);
      expect(warn).toHaveBeenCalledTimes(1);
      expect(warn.mock.calls[0]![0]).toContain(B);
      expect(plan(s.visits([due(A, true), due(B, true)], 2))).toEqual(['a×100', 'b×25']);
    } finally {
      warn.mockRestore();
    }
  });

  it('weighs 1 (with one warning) a tenant the weight function throws for: the round goes on', () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      const { shares: s } = shares({
        tenantWeights: (tenantId) => {
          if (tenantId === B) throw new Error('plans unavailable');
          return 4;
        },
      });
      expect(plan(s.visits([due(A, true), due(B, true)], 2))).toEqual(['a×100', 'b×25']);
      expect(s.weight(B)).toBe(1);
      expect(warn).toHaveBeenCalledTimes(1);
      expect(warn.mock.calls[0]![0]).toContain('plans unavailable');
    } finally {
      warn.mockRestore();
    }
  });

  it('finds a listed weight for a tenant id in upper case (relay.tenants may supply one)', () => {
    const { shares: s } = shares({ tenantWeights: { [A]: 2 } });
    expect(s.weight(A.toUpperCase())).toBe(2);
  });

  it('finds a listed weight whatever the case of the tenant id', () => {
    const { shares: s } = shares({ tenantWeights: { [A.toUpperCase()]: 2 } });
    expect(s.weight(A)).toBe(2);
    expect(s.weight(B)).toBe(1);
  });

  it('keeps a lane free for SHARED_FOR_MS after a round with others, then gives the backlogged tenant every lane', () => {
    const { shares: s, clock } = shares();
    s.visits([due(A, true), due(B)], 2);
    clock.advance(SHARED_FOR_MS - 1);
    expect(plan(s.visits([due(A, true)], 2))).toEqual(['a×100']);
    expect(plan(s.visits([due(A, true)], 1))).toEqual(['a×100']);
    clock.advance(1);
    expect(plan(s.visits([due(A, true)], 2))).toEqual(['a×-', 'a×-']);
  });

  it('counts a tenant visited late (on a free lane) as a round with others', () => {
    const { shares: s } = shares();
    expect(s.late(due(B))).toEqual(due(B));
    expect(plan(s.visits([due(A, true)], 3))).toEqual(['a×100', 'a×100']);
  });

  it('visits the same entry on each lane of a backlogged tenant (the relay counts it once)', () => {
    const { shares: s } = shares();
    const visits = s.visits([due(A, true), due(B)], 3);
    expect(visits[1]).toBe(visits[2]);
  });

  it('off: visits every tenant as when alone, whatever the weights', () => {
    const { shares: s } = shares({ tenantWeights: { [B]: 3 } }, false);
    expect(plan(s.visits([due(A, true), due(B, true)], 2))).toEqual(['a×-', 'a×-', 'b×-', 'b×-']);
  });
});

describe('relay.tenantWeights', () => {
  it('accepts a map of tenant ids to positive weights, a function, or null', () => {
    for (const tenantWeights of [{ [A]: 0.5, [B]: 10_000 }, () => 1, null])
      expect(resolveOutboxOptions({ relay: { tenantWeights } }).problems).toEqual([]);
  });

  it('names every bad entry, where it is and what it must be', () => {
    const { problems } = resolveOutboxOptions({
      relay: { tenantWeights: { [A]: 0, 'tenant-b': 2, [C]: '3' as unknown as number } },
    });
    expect(problems).toHaveLength(3);
    expect(problems[0]).toContain(`relay.tenantWeights["${A}"] must be a number above 0`);
    expect(problems[1]).toContain('tenant-b');
    expect(problems[2]).toContain(`relay.tenantWeights["${C}"]`);
    expect(resolveOutboxOptions({ relay: { tenantWeights: [2] as never } }).problems[0]).toContain(
      'relay.tenantWeights must be a map of tenant ids to weights',
    );
  });
});
