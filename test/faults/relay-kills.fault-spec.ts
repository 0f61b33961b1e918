import { useFaultFixture } from './support/fault-fixture';
import { pace } from './support/fault-fleet';
import { faultRandom } from './support/fault-random';
import { checkHistory, timeToQuiet } from './support/history';
import { enqueueLoad } from './support/load';

const EVENTS = 20_000;
const LEASE_MS = 2000;

describe('fault: relay processes killed with SIGKILL while draining', () => {
  const random = faultRandom(__filename);
  const fixture = useFaultFixture(random);

  it('loses nothing and duplicates no effect while a random relay of three is killed about every second', async () => {
    const ids = await enqueueLoad(fixture.db.url, EVENTS);
    const fleet = await fixture.startFleet(3, { LEASE_MS: String(LEASE_MS), BATCH_SIZE: '10' });
    let kills = 0;
    for (;;) {
      await pace(700 + random.int(600));
      const [left] = await fixture.db.sql<{ n: number }>(
        `select count(*)::int n from event_outbox where status = 'pending'`,
      );
      if (left!.n === 0 || kills >= 25) break;
      await fleet.killAndRestart(random.int(3));
      kills++;
    }
    await fleet.killAndRestart(random.int(3));
    kills++;
    const recoveryMs = await timeToQuiet(fixture.db, 60_000);
    const report = await checkHistory(fixture.db, {
      scenario: '3 relays, SIGKILL ~1/s',
      table: 'fault_effects',
      consumers: ['fx-writer', 'fx-audit'],
      faults: kills,
      recoveryMs,
      expectedEvents: ids,
    });
    expect(kills).toBeGreaterThanOrEqual(5);
    expect(report).toMatchObject({ events: EVENTS, lost: 0, duplicated: 0, phantom: 0, leftOpen: 0 });
  });
});
