import { ClaimSizer, QUICK_BATCH_MS, type BatchSummary } from './claim-sizer';
import { resolveOutboxOptions } from '../options/outbox-options';

const A = '00000000-0000-4000-8000-00000000000a';
const B = '00000000-0000-4000-8000-00000000000b';

const quick: BatchSummary = {
  full: true,
  noWrites: true,
  reran: false,
  external: false,
  ms: QUICK_BATCH_MS - 1,
};
/** As shipped: batches whose handlers write grow too (`optimisticBatches`), unless `writingGrows` is false. */
const sizer = (writingGrows = true): ClaimSizer =>
  new ClaimSizer({ batchSize: 100, leaseMs: 60_000 }, { max: 500 }, writingGrows);

/** The sizes of a tenant's next claims, each after a batch that ran as `batch`. */
function sizes(s: ClaimSizer, tenant: string, batches: BatchSummary[]): number[] {
  return batches.map((batch) => {
    s.ran(tenant, batch);
    return s.next(tenant);
  });
}

describe('ClaimSizer', () => {
  it('starts every tenant at relay.batchSize', () => {
    expect(sizer().next(A)).toBe(100);
  });

  it('doubles a tenant’s claims after quick full batches that write nothing, up to relay.maxBatchSize', () => {
    expect(sizes(sizer(), A, [quick, quick, quick, quick])).toEqual([200, 400, 500, 500]);
  });

  it('doubles them after quick full batches whose handlers wrote, each without a savepoint', () => {
    expect(sizes(sizer(), A, [{ ...quick, noWrites: false }, quick, { ...quick, noWrites: false }])).toEqual([
      200, 400, 500,
    ]);
  });

  it('keeps claims at relay.batchSize after a batch that wrote with a savepoint per handler (optimisticBatches off)', () => {
    const s = sizer(false);
    s.ran(A, quick);
    expect(s.next(A)).toBe(200);
    s.ran(A, { ...quick, noWrites: false });
    expect(s.next(A)).toBe(100);
  });

  it('keeps claims at relay.batchSize after a batch that ran again, was not full, had external deliveries or failed', () => {
    for (const batch of [
      { ...quick, noWrites: false, reran: true },
      { ...quick, full: false },
      { ...quick, external: true },
      null,
    ]) {
      const s = sizer();
      s.ran(A, quick);
      s.ran(A, quick);
      expect(s.next(A)).toBe(400);
      s.ran(A, batch);
      expect(s.next(A)).toBe(100);
    }
  });

  it('halves a grown claim after a batch that took longer, never below relay.batchSize', () => {
    const slow = { ...quick, ms: QUICK_BATCH_MS };
    expect(sizes(sizer(), A, [quick, quick, quick, slow, quick, slow, slow, slow])).toEqual([
      200, 400, 500, 250, 500, 250, 125, 100,
    ]);
  });

  it('grows each tenant on its own', () => {
    const s = sizer();
    s.ran(A, quick);
    s.ran(A, quick);
    expect([s.next(A), s.next(B)]).toEqual([400, 100]);
  });

  it('does not grow where the policy has no claim growth (relay.maxBatchSize is relay.batchSize)', () => {
    const s = new ClaimSizer({ batchSize: 100, leaseMs: 60_000 }, null, true);
    expect(sizes(s, A, [quick, quick])).toEqual([100, 100]);
  });

  it('after a claim that timed out: every tenant takes half, none grows until the lane is back at relay.batchSize', () => {
    const s = sizer();
    s.ran(A, quick);
    expect(s.timedOut(A, 200)).toBe(true);
    // half of the claim that timed out, at most relay.batchSize, for every tenant of the lane
    expect([s.next(A), s.next(B)]).toEqual([100, 100]);
    expect(s.timedOut(B, 100)).toBe(true);
    expect(s.next(A)).toBe(50);
    s.ran(A, quick);
    expect(s.next(A)).toBe(50);
    // quick full claims bring the lane back to relay.batchSize (a quarter of relay.leaseMs)
    s.claimed(50, true, 1000);
    expect(s.next(A)).toBe(100);
    s.ran(A, quick);
    expect(s.next(A)).toBe(200);
  });

  it('a claim of one event that timed out cannot be made smaller', () => {
    const s = new ClaimSizer({ batchSize: 1, leaseMs: 60_000 }, null, true);
    expect(s.timedOut(A, 1)).toBe(false);
  });

  it('a shrunk lane grows back only after full claims well within its bound', () => {
    const s = sizer();
    s.timedOut(A, 100);
    s.claimed(50, false, 10);
    s.claimed(50, true, 15_000);
    expect(s.next(A)).toBe(50);
    s.claimed(50, true, 14_999);
    expect(s.next(A)).toBe(100);
  });
});

describe('relay.maxBatchSize', () => {
  it('defaults to 500, or to relay.batchSize when that is larger', () => {
    expect(resolveOutboxOptions({}).options.relay.maxBatchSize).toBe(500);
    expect(resolveOutboxOptions({ relay: { batchSize: 800 } }).options.relay.maxBatchSize).toBe(800);
    expect(resolveOutboxOptions({ relay: { maxBatchSize: 100 } }).problems).toEqual([]);
  });

  it.each([50, 0, 1.5, Number.NaN])(
    'refuses %s (not an integer of at least relay.batchSize, 100), naming both',
    (max) => {
      const { problems } = resolveOutboxOptions({ relay: { maxBatchSize: max } });
      expect(problems).toEqual([
        expect.stringMatching(
          /^option relay\.maxBatchSize must be an integer no smaller than relay\.batchSize \(100\), got/,
        ),
      ]);
    },
  );
});
