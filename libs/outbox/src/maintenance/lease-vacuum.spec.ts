import { Logger } from '@nestjs/common';
import { resolveOutboxOptions } from '../options/outbox-options';
import type { OutboxStore } from '../store/outbox.store';
import type { SqlStatement } from '../store/sql';
import { LeaseVacuum } from './lease-vacuum';

/** A store that answers the permission check and the horizon read, and counts vacuums. */
class FakeStore {
  horizon: string | null = null;
  vacuums = 0;
  horizonReads = 0;

  async relayQuery<T>(statement: SqlStatement): Promise<T[]> {
    if (/pg_has_role/.test(statement.text)) return [{ allowed: true }] as T[];
    this.horizonReads++;
    return (this.horizon === null ? [] : [{ horizon: this.horizon }]) as T[];
  }

  async relayCommand(statement: SqlStatement): Promise<void> {
    if (/^vacuum /.test(statement.text)) this.vacuums++;
  }
}

describe('LeaseVacuum', () => {
  const EVERY = 100;
  let store: FakeStore;
  let now: number;
  const options = resolveOutboxOptions({ relay: { vacuumLeasesEvery: EVERY } }).options;
  const vacuumWith = (horizonVacuums: { heldEveryMs: number } | null): LeaseVacuum =>
    new LeaseVacuum(options, store as unknown as OutboxStore, { horizonVacuums }, { now: () => now });
  /** Releases `EVERY` leases `times` times, each vacuum due finished before the next. */
  const release = async (vacuum: LeaseVacuum, times: number): Promise<void> => {
    for (let i = 0; i < times; i++) await vacuum.noteReleased(EVERY);
  };

  beforeAll(() => Logger.overrideLogger(false));
  afterAll(() => Logger.overrideLogger(new Logger()));
  beforeEach(() => {
    store = new FakeStore();
    now = 1_000_000;
  });

  it('vacuums every so many released leases while nothing holds the horizon', async () => {
    const vacuum = vacuumWith({ heldEveryMs: 60_000 });
    await release(vacuum, 5);
    expect(store.vacuums).toBe(5);
  });

  it('vacuums every so many released leases while the horizon moves', async () => {
    const vacuum = vacuumWith({ heldEveryMs: 60_000 });
    for (let i = 0; i < 5; i++) {
      store.horizon = String(1000 + i);
      await release(vacuum, 1);
    }
    expect(store.vacuums).toBe(5);
  });

  it('skips the vacuums while the horizon stays where it was at the previous one, but for one every heldEveryMs', async () => {
    const vacuum = vacuumWith({ heldEveryMs: 60_000 });
    store.horizon = '1000';
    await release(vacuum, 10);
    expect(store.vacuums).toBe(1);
    expect(store.horizonReads).toBe(10);
    now += 59_999;
    await release(vacuum, 1);
    expect(store.vacuums).toBe(1);
    now += 1;
    await release(vacuum, 3);
    expect(store.vacuums).toBe(2);
  });

  it('vacuums again as soon as the horizon moves, and when it is no longer held', async () => {
    const vacuum = vacuumWith({ heldEveryMs: 60_000 });
    store.horizon = '1000';
    await release(vacuum, 3);
    expect(store.vacuums).toBe(1);
    store.horizon = '1001';
    await release(vacuum, 3);
    expect(store.vacuums).toBe(2);
    store.horizon = null;
    await release(vacuum, 3);
    expect(store.vacuums).toBe(5);
  });

  it('vacuums every so many released leases, held or not, with the mechanism switched off', async () => {
    const vacuum = vacuumWith(null);
    store.horizon = '1000';
    await release(vacuum, 5);
    expect(store.vacuums).toBe(5);
    expect(store.horizonReads).toBe(0);
  });
});
