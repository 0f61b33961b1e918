import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { FAULT_EFFECTS_SQL } from './support/fault-consumers';
import { FaultFleet, pace, randomIndex } from './support/fault-fleet';
import { checkHistory, timeToQuiet } from './support/history';
import { enqueueLoad } from './support/load';

const EVENTS = 20_000;
const LEASE_MS = 2000;

describe('fault: relay processes killed with SIGKILL while draining', () => {
  let db: TestDatabase;
  let fleet: FaultFleet;
  beforeAll(async () => {
    db = await createTestDatabase([FAULT_EFFECTS_SQL]);
  });
  afterAll(async () => {
    await fleet?.stopAll();
    await db?.drop();
  });

  it('loses nothing and duplicates no effect while a random relay of three is killed about every second', async () => {
    const ids = await enqueueLoad(db.url, EVENTS);
    fleet = new FaultFleet({ DATABASE_URL: db.url, LEASE_MS: String(LEASE_MS) });
    await fleet.start(3);
    let kills = 0;
    for (;;) {
      await pace(700 + randomIndex(600));
      const [left] = await db.sql<{ n: number }>(`select count(*)::int n from event_outbox where status = 'pending'`);
      if (left!.n === 0 || kills >= 25) break;
      await fleet.killAndRestart(randomIndex(3));
      kills++;
    }
    await fleet.killAndRestart(randomIndex(3));
    kills++;
    const recoveryMs = await timeToQuiet(db, 60_000);
    const report = await checkHistory(db, {
      scenario: '3 relays, SIGKILL ~1/s',
      table: 'fault_effects',
      consumers: ['fx-writer', 'fx-audit'],
      faults: kills,
      recoveryMs,
      expectedEvents: ids,
    });
    expect(kills).toBeGreaterThanOrEqual(2);
    expect(report).toMatchObject({ events: EVENTS, lost: 0, duplicated: 0, phantom: 0, leftOpen: 0 });
  });
});
