import { Client } from 'pg';
import { claimNewEvents } from '../../libs/outbox/src/store/sql/claim-new';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import { genericPlanBuffers } from '../support/generic-plan-buffers';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { TENANT, TENANTS } from '../support/outbox-fixture';
import { insertPendingEvents, registerLiveConsumer } from '../support/claim-history';

const EVENT = 'test.claim-beside-backlog.v1';
const CONSUMER = 'claimBesideBacklog.local';
/** The other tenant's backlog: as many pending events, and as many settled since the last VACUUM. */
const BACKLOG = 20_000;
const names = outboxNames();

/**
 * A tenant's claim of its one new event reads about as many pages beside another tenant's backlog as alone: the
 * pending events' index leads with the tenant, so the scan starts at this tenant's entries and meets none of the
 * backlog's, pending or settled and not yet vacuumed; what grows is the depth of the indexes. Measured beside a
 * drain of 200,000: 33 shared buffers against 23 on an idle relay, the same execution time (ADR 1106, addendum
 * "the small claim at the server beside a drain"). The lean claim's generic plan, as the relay runs it.
 */
describe("a tenant's claim beside another tenant's backlog", () => {
  const backlogged = TENANTS.find((t) => t !== TENANT)!;
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(() => db?.drop());

  /** The shared buffers of the small tenant's lean claim on its generic plan (rolled back), on a connection of its own. */
  async function smallClaimBuffers(): Promise<number> {
    const client = new Client({ connectionString: db.url });
    await client.connect();
    try {
      return await genericPlanBuffers(
        client,
        claimNewEvents(names, {
          tenantId: TENANT,
          inProcess: [CONSUMER],
          liveWithinMs: 60_000,
          limit: 100,
          leaseToken: '00000000-0000-0000-0000-000000000001',
          leaseMs: 60_000,
          from: '0',
          leasesSince: new Date(0).toISOString(),
        }),
      );
    } finally {
      await client.end();
    }
  }

  it('reads about as many buffers as alone, not the backlog’s', async () => {
    await registerLiveConsumer(db, CONSUMER, [EVENT]);
    await insertPendingEvents(db, TENANT, EVENT, 1);
    await db.sql('analyze event_outbox');
    const alone = await smallClaimBuffers();

    // the backlog as a drain leaves it before a vacuum: half settled (leases inserted and deleted, the events
    // published), the other half pending, the statistics from before the settling
    await insertPendingEvents(db, backlogged, EVENT, 2 * BACKLOG);
    await db.sql('analyze event_outbox');
    await db.sql(
      `insert into outbox_event_leases (event_id, tenant_id, lease_token, lease_expires_at)
       select id, tenant_id, gen_random_uuid(), now() from event_outbox
        where tenant_id = $1 and status = 'pending' order by seq limit $2`,
      [backlogged, BACKLOG],
    );
    await db.sql(
      `update event_outbox set status = 'published', published_at = now()
        where id in (select event_id from outbox_event_leases)`,
    );
    await db.sql('delete from outbox_event_leases');
    const beside = await smallClaimBuffers();

    // the depth of the indexes over 40,000 more entries, a page or two each, not their entries: 14 buffers alone,
    // 27 beside (57 in the partitioned layout, whose claim, without a floor here, probes every range's indexes);
    // a pending index in `seq` order alone, walked past the backlog, made it 1,007
    expect(beside - alone).toBeLessThan(60);
  });
});
