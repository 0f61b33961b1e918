import { useFaultFixture } from './support/fault-fixture';
import { pace } from './support/fault-fleet';
import { faultRandom } from './support/fault-random';
import { checkHistory, timeToQuiet } from './support/history';
import { enqueueLoad } from './support/load';

const EVENTS = 20_000;
const LEASE_MS = 1000;

describe('fault: relays paused (SIGSTOP) past their lease, then resumed', () => {
  const random = faultRandom(__filename);
  const fixture = useFaultFixture(random);

  it('refuses the late outcomes of resumed relays, so no effect happens twice', async () => {
    const ids = await enqueueLoad(fixture.db.url, EVENTS);
    const fleet = await fixture.startFleet(3, {
      LEASE_MS: String(LEASE_MS),
      TIMEOUT_MS: '500',
      BATCH_SIZE: '5',
    });
    let pauses = 0;
    for (;;) {
      const [left] = await fixture.db.sql<{ n: number }>(
        `select count(*)::int n from event_outbox where status = 'pending'`,
      );
      if (left!.n === 0 || pauses >= 12) break;
      const victim = fleet.relays[random.int(3)]!;
      victim.signal('SIGSTOP');
      pauses++;
      await pace(LEASE_MS + 500);
      victim.signal('SIGCONT');
      await pace(200);
    }
    const recoveryMs = await timeToQuiet(fixture.db, 60_000);
    const report = await checkHistory(fixture.db, {
      scenario: '3 relays, SIGSTOP past the lease then SIGCONT',
      table: 'fault_effects',
      consumers: ['fx-writer', 'fx-audit'],
      faults: pauses,
      recoveryMs,
      expectedEvents: ids,
    });
    expect(pauses).toBeGreaterThanOrEqual(4);
    expect(report).toMatchObject({ events: EVENTS, lost: 0, duplicated: 0, phantom: 0, leftOpen: 0 });
  });
});
