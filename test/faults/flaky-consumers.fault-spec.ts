import { useFaultFixture } from './support/fault-fixture';
import { faultRandom } from './support/fault-random';
import { checkHistory, timeToQuiet } from './support/history';
import { enqueueLoad } from './support/load';

const EVENTS = 2000;

describe('fault: consumers that throw, hang past their timeout, or run 10× slower', () => {
  const fixture = useFaultFixture(faultRandom(__filename));

  it('retries failures and timeouts until every event reached both consumers exactly once', async () => {
    const ids = await enqueueLoad(fixture.db.url, EVENTS);
    const began = Date.now();
    await fixture.startFleet(2, { LEASE_MS: '3000', TIMEOUT_MS: '300', FLAKY: '1' });
    await timeToQuiet(fixture.db, 180_000);
    const [faults] = await fixture.db.sql<{ n: number }>(
      `select coalesce(sum(attempt_count - 1), 0)::int n from outbox_deliveries`,
    );
    const [timeouts] = await fixture.db.sql<{ n: number }>(
      `select count(*)::int n from outbox_deliveries where error_code = 'timeout'`,
    );
    const report = await checkHistory(fixture.db, {
      scenario: 'flaky consumers (throw ~10%, hang ~2.5%, 10x slow ~10%)',
      table: 'fault_effects',
      consumers: ['fx-writer', 'fx-audit'],
      faults: faults!.n,
      recoveryMs: Date.now() - began,
      expectedEvents: ids,
    });
    expect(faults!.n).toBeGreaterThan(0);
    expect(timeouts!.n).toBeGreaterThan(0);
    expect(report).toMatchObject({ events: EVENTS, lost: 0, duplicated: 0, phantom: 0, leftOpen: 0 });
  });
});
