import { Client } from 'pg';
import { claimNewEvents } from '../../libs/outbox/src/store/sql/claim-new';
import { fanOutPendingEvents } from '../../libs/outbox/src/store/sql/fan-out';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import type { SqlStatement } from '../../libs/outbox/src/store/sql/statement';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { TENANT, truncateOutbox } from '../support/outbox-fixture';
import { waitFor } from '../support/wait-for';
import { insertPendingEvents, registerLiveConsumer } from '../support/claim-history';

const EVENT = 'test.lost-leases.v1';
const CONSUMER = 'lostLeases.local';
const ROWS_CONSUMER = 'lostLeases.rows';
const EVENTS = 3;
const names = outboxNames();

/**
 * A claim whose snapshot predates another relay's lease of an event locks that event (the lease is not in its
 * snapshot) and leaves it to the lease's holder (the upsert's condition fails on the live lease): the claim
 * counts it as `lost`, so that the relay claims again when that is all it found (see `TenantRound`). Here the
 * other relay's lease is inserted in a transaction still open when the claim runs: the claim's lease insert waits
 * for it, then finds it live.
 */
describe('a claim that locks an event leased by another relay', () => {
  let db: TestDatabase;
  let claimer: Client;
  let other: Client;
  let claimerPid: number;
  beforeAll(async () => {
    db = await createTestDatabase();
    claimer = new Client({ connectionString: db.url });
    other = new Client({ connectionString: db.url });
    await Promise.all([claimer.connect(), other.connect()]);
    claimerPid = (await claimer.query<{ pid: number }>(`select pg_backend_pid() as pid`)).rows[0]!.pid;
  });
  beforeEach(async () => {
    await registerLiveConsumer(db, CONSUMER, [EVENT]);
    await insertPendingEvents(db, TENANT, EVENT, EVENTS);
  });
  afterEach(async () => {
    await truncateOutbox(db);
  });
  afterAll(async () => {
    await Promise.all([claimer?.end(), other?.end()]);
    await db?.drop();
  });

  const common = {
    tenantId: TENANT,
    inProcess: [CONSUMER],
    liveWithinMs: 60_000,
    limit: EVENTS,
    leaseToken: '00000000-0000-0000-0000-000000000001',
    leaseMs: 60_000,
  };
  const forms: [string, () => SqlStatement][] = [
    ['the lean claim', () => claimNewEvents(names, common)],
    ['the fan-out', () => fanOutPendingEvents(names, { ...common, hosted: [CONSUMER], tenantConsumers: [] })],
  ];

  type Claimed = { leases: unknown[]; deliveries: { event_seq: string }[]; written: string[]; lost: number };

  /** Runs `statement` while another relay's lease of the first event waits to commit: the claim's lease insert waits for it. */
  async function claimBesideOtherLease(statement: SqlStatement): Promise<Claimed> {
    // the other relay's lease of the first event, not committed yet
    await other.query('begin');
    await other.query(
      `insert into outbox_event_leases (event_id, tenant_id, lease_token, lease_expires_at)
       select id, tenant_id, gen_random_uuid(), now() + interval '1 minute' from event_outbox order by seq limit 1`,
    );
    const claimed = claimer.query<Claimed>(statement.text, [...statement.values]);
    try {
      await waitFor(
        async () =>
          (
            await db.sql<{ waiting: boolean }>(
              `select wait_event_type = 'Lock' as waiting from pg_stat_activity where pid = $1`,
              [claimerPid],
            )
          )[0]?.waiting,
        { message: 'the claim to wait for the other lease' },
      );
    } finally {
      await other.query('commit');
    }
    const [row] = (await claimed).rows;
    await db.sql(`delete from outbox_event_leases`);
    return row!;
  }

  for (const [form, statement] of forms)
    it(`${form} counts it as lost and leases the others`, async () => {
      const { leases, lost } = await claimBesideOtherLease(statement());
      expect({ leased: leases.length, lost }).toEqual({ leased: EVENTS - 1, lost: 1 });
    });

  it('the fan-out writes no delivery row of the lost event for its other consumers, nor the event', async () => {
    // a consumer hosted here that is not in-process: the fan-out writes its rows, of the events it owns
    await registerLiveConsumer(db, ROWS_CONSUMER, [EVENT]);
    const { leases, deliveries, written, lost } = await claimBesideOtherLease(
      fanOutPendingEvents(names, { ...common, hosted: [CONSUMER, ROWS_CONSUMER], tenantConsumers: [] }),
    );
    const first = await db.sql<{ id: string }>(`select id from event_outbox order by seq limit 1`);
    expect({ leased: leases.length, lost, deliveries: deliveries.length, written: written.length }).toEqual({
      leased: EVENTS - 1,
      lost: 1,
      deliveries: EVENTS - 1,
      written: EVENTS - 1,
    });
    expect(written).not.toContain(first[0]!.id);
  });
});
