import { Logger } from '@nestjs/common';
import type { ModuleRef } from '@nestjs/core';
import { resolveOutboxOptions } from '../options/outbox-options';
import type { OutboxStore } from '../store/outbox.store';
import type { SqlStatement } from '../store/sql';
import { OutboxRetention } from './outbox.retention';

/** A store whose purge batches each take `batchMs` on the test's clock and delete what `batches` says. */
class FakeStore {
  constructor(
    private readonly clock: { now: number },
    private readonly batches: number[],
    private readonly batchMs: number,
  ) {}
  purges = 0;

  async relayQuery<T>(statement: SqlStatement): Promise<T[]> {
    if (/purge_settled/.test(statement.text)) {
      this.clock.now += this.batchMs;
      return [{ deleted: this.batches[this.purges++] ?? 0, ranges: [], ats: [] }] as T[];
    }
    if (/purge_dedupe_keys/.test(statement.text)) return [{ deleted: 0 }] as T[];
    return [{ made: 0, dropped: 0, deleted: 0 }] as T[];
  }
}

/** Retention whose pauses between batches are counted, not waited. */
class CountedRetention extends OutboxRetention {
  readonly pauses: number[] = [];
  protected override pause(ms: number): Promise<void> {
    this.pauses.push(ms);
    return Promise.resolve();
  }
}

describe("OutboxRetention's pace", () => {
  beforeAll(() => Logger.overrideLogger(false));
  afterAll(() => Logger.overrideLogger(new Logger()));

  it('waits after each full batch as long as the batch took, and not after the last (short) one', async () => {
    const clock = { now: 1_000_000 };
    const options = resolveOutboxOptions({ retention: { publishedDays: 7, batchSize: 1_000 } }).options;
    // three full batches of 120 ms each, then a short one
    const store = new FakeStore(clock, [1_000, 1_000, 1_000, 10], 120);
    const retention = new CountedRetention(options, store as unknown as OutboxStore, {} as ModuleRef, {
      now: () => clock.now,
    });
    const result = await retention.purgeNow();
    // four batches of events, one of expired idempotency keys
    expect(result).toMatchObject({ deletedEvents: 3_010, batches: 5 });
    expect(retention.pauses).toEqual([120, 120, 120]);
  });
});
