import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { FAULT_EFFECTS_SQL } from './support/fault-consumers';
import { FaultFleet, pace, randomIndex } from './support/fault-fleet';
import { checkHistory, timeToQuiet } from './support/history';
import { enqueueLoad } from './support/load';

const EVENTS = 10_000;
const LEASE_MS = 1000;

describe('fault: relays paused (SIGSTOP) past their lease, then resumed', () => {
  let db: TestDatabase;
  let fleet: FaultFleet;
  beforeAll(async () => {
    db = await createTestDatabase([FAULT_EFFECTS_SQL]);
  });
  afterAll(async () => {
    await fleet?.stopAll();
    await db?.drop();
  });

  it('refuses the late outcomes of resumed relays, so no effect happens twice', async () => {
    const ids = await enqueueLoad(db.url, EVENTS);
    fleet = new FaultFleet({ DATABASE_URL: db.url, LEASE_MS: String(LEASE_MS), TIMEOUT_MS: '500' });
    await fleet.start(3);
    let pauses = 0;
    for (;;) {
      const [left] = await db.sql<{ n: number }>(`select count(*)::int n from event_outbox where status = 'pending'`);
      if (left!.n === 0 || pauses >= 12) break;
      const victim = fleet.relays[randomIndex(3)]!;
      victim.signal('SIGSTOP');
      pauses++;
      await pace(LEASE_MS * 2);
      victim.signal('SIGCONT');
      await pace(200);
    }
    const recoveryMs = await timeToQuiet(db, 60_000);
    const report = await checkHistory(db, {
      scenario: '3 relays, SIGSTOP past the lease then SIGCONT',
      table: 'fault_effects',
      consumers: ['fx-writer', 'fx-audit'],
      faults: pauses,
      recoveryMs,
      expectedEvents: ids,
    });
    expect(pauses).toBeGreaterThanOrEqual(1);
    expect(report).toMatchObject({ events: EVENTS, lost: 0, duplicated: 0, phantom: 0, leftOpen: 0 });
  });
});
