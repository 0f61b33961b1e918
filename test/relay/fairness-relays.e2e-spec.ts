import { join } from 'node:path';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { enqueueIn, truncateTables } from '../support/outbox-fixture';
import { FaultFleet } from '../faults/support/fault-fleet';
import { waitFor } from '../support/wait-for';

/** Two relay processes (test/support/fair-relay-child.ts), each with two lanes, claims of 50 growing to 200. */
const CHILD = join(__dirname, '..', 'support', 'fair-relay-child.ts');
const MAX_BATCH_SIZE = 200;
const BUSY = '44444444-4444-4444-8444-444444444444';
const QUIET = '55555555-5555-4555-8555-555555555555';
const BACKLOG = 60_000;

const PROBE_SQL = `create table fair_probe (
  event_id uuid primary key,
  relay int not null,
  busy_at bigint[] not null
)`;

/**
 * Fairness with several relay processes (ADR 1106): each relay shares its own rounds, with no counter across
 * them. What still holds: a quiet tenant's event, woken in every relay by the NOTIFY of its commit, is handled by
 * one of them after at most about one of the busy tenant's batches on that relay — the relay that serves it left
 * it a lane and held the busy tenant's claims to relay.batchSize. (The other relay drains on meanwhile: the busy
 * tenant's events handled there are not a wait of the quiet tenant's, whose claim skips the busy tenant's rows.)
 */
describe('fairness between tenants, two relay processes', () => {
  let db: TestDatabase;
  let app: TestApp;
  let fleet: FaultFleet | null = null;
  beforeAll(async () => {
    db = await createTestDatabase([PROBE_SQL]);
    // no relay here: its commits wake the relay processes by NOTIFY
    app = await buildApp({ url: db.url });
  });
  afterAll(async () => {
    await fleet?.stopAll();
    await app?.close();
    await db?.drop();
  });

  const published = async (tenantId: string): Promise<number> => {
    const [row] = await db.sql<{ n: number }>(
      `select count(*)::int as n from event_outbox where tenant_id = $1 and status = 'published'`,
      [tenantId],
    );
    return row!.n;
  };
  const busyPublished = (): Promise<number> => published(BUSY);
  const backlog = (tenantId: string, events: number): Promise<unknown> =>
    // behind the library's back: no wake-up names the tenant, the relays' polls find it
    db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload)
       select gen_random_uuid(), $1, 'test.tick.v1', jsonb_build_object('n', n) from generate_series(1, $2::int) n`,
      [tenantId, events],
    );

  it("handles a quiet tenant's events within about one batch of the relay that serves them while both drain a backlog", async () => {
    await backlog(BUSY, BACKLOG);
    fleet = new FaultFleet({ DATABASE_URL: db.url, BUSY }, CHILD);
    await fleet.start(2);
    await waitFor(async () => (await busyPublished()) >= 2000, {
      timeoutMs: 60_000,
      message: 'the backlog to be draining',
    });
    const waited: number[] = [];
    for (let i = 0; i < 10; i++) {
      const id = await enqueueIn(app, { tenantId: QUIET, eventName: 'test.tick.v1' });
      // the relays' clock is this one (same machine)
      const committedAt = Date.now();
      const probe = await waitFor(
        async () =>
          (
            await db.sql<{ busy_at: string[] }>('select busy_at from fair_probe where event_id = $1', [id])
          )[0],
        { timeoutMs: 30_000, message: "the quiet tenant's event to be handled" },
      );
      // the busy tenant's events the relay that served it handled between its commit and its handler
      const handledSince = probe.busy_at.filter((at) => Number(at) >= committedAt).length;
      waited.push(handledSince);
    }
    // every quiet event met the backlog
    expect(await busyPublished()).toBeLessThan(BACKLOG);
    // The first waits for the batches the serving relay had in flight, one per lane, grown up to 200 (50 to 400
    // measured); then that relay leaves a lane free and holds the busy tenant to claims of 50: 0 to 100 measured
    // for each later one, 200 to 800 with the fair shares off (FAIR_SHARES=off in the children).
    expect(Math.max(...waited.slice(1))).toBeLessThanOrEqual(MAX_BATCH_SIZE);
  });

  it('drains two backlogged tenants in about the ratio of their weights across both relays', async () => {
    await fleet?.stopAll();
    fleet = null;
    await truncateTables(db, 'event_outbox cascade');
    const [heavy, light] = ['77777773-7777-4777-8777-777777777777', '77777771-7777-4777-8777-777777777777'];
    await backlog(heavy, 20_000);
    await backlog(light, 20_000);
    // each relay weighs the tenants it finds due in its own rounds: heavy claims 50, light 50 × 1/3, a round
    fleet = new FaultFleet(
      { DATABASE_URL: db.url, BUSY, TENANT_WEIGHTS: JSON.stringify({ [heavy]: 3 }) },
      CHILD,
    );
    await fleet.start(2);
    await waitFor(async () => (await published(heavy)) >= 1000, {
      timeoutMs: 60_000,
      message: 'both backlogs to be draining',
    });
    const [heavyFrom, lightFrom] = [await published(heavy), await published(light)];
    await waitFor(async () => (await published(heavy)) >= heavyFrom + 3000, {
      timeoutMs: 60_000,
      message: "3,000 more of the heavier tenant's events to be handled",
    });
    const [heavyTo, lightTo] = [await published(heavy), await published(light)];
    await fleet.stopAll();
    fleet = null;
    // both were backlogged throughout the window
    expect(lightTo).toBeLessThan(20_000);
    const ratio = (heavyTo - heavyFrom) / (lightTo - lightFrom);
    // 2.64 and 2.94 measured at load 9.5 (1.02 with equal weights): each relay's rounds hold the 3:1, the claims
    // of both interleave
    expect(ratio).toBeGreaterThanOrEqual(2);
    expect(ratio).toBeLessThanOrEqual(4);
  });
});
