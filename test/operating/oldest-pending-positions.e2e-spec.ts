import { Client } from 'pg';
import { outboxNames } from '../../libs/outbox/src/store/sql';
import type { OldestPendingAgeRow } from '../../libs/outbox/src/store/sql/pending-age';
import { PendingAgeReadings } from '../../libs/outbox/src/store/pending-age-readings';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { createLoginRole, type TestRole } from '../support/test-roles';
import { waitFor } from '../support/wait-for';
import { truncateTables } from '../support/outbox-fixture';

const A = '1a1a1a1a-0000-4000-8000-00000000001a';
const B = '2b2b2b2b-0000-4000-8000-00000000002b';
const ORPHAN_AFTER_MS = 3_600_000;
const ONE_ARGUMENT = `select ${outboxNames().oldestPendingAge}($1 * interval '1 millisecond') as seconds`;
/** A lock the late insert's trigger waits for, after its event has taken its `seq` and before it has an xid. */
const LATE_LOCK = 39_0039;

/**
 * The oldest pending reading starts past the settled (ADR 1206, addendum "The oldest pending reading starts past
 * the settled"): while a snapshot is held, `event_outbox_pending_idx` keeps an entry for every event settled since
 * it began, and a reading from each tenant's start walks them all. From a reader's positions it does not, and it
 * gives the one-argument form's answer.
 */
describe('oldest pending reading from positions', () => {
  let db: TestDatabase;
  let relayRole: TestRole;
  let relay: Client;

  beforeAll(async () => {
    db = await createTestDatabase([
      // an insert that waits here has taken its seq (the identity is evaluated first) and holds no xid yet
      `create function public.test_late_insert() returns trigger language plpgsql as $$
       begin
         if new.event_name = 'test.late.v1' then perform pg_advisory_xact_lock(${LATE_LOCK}); end if;
         return new;
       end $$`,
      `create trigger test_late_insert before insert on public.event_outbox
         for each row execute function public.test_late_insert()`,
    ]);
    relayRole = await createLoginRole(db, 'outbox_relay');
    relay = new Client({ connectionString: relayRole.url });
    await relay.connect();
  });
  afterAll(async () => {
    await relay?.end();
    await db?.drop();
    await relayRole?.drop();
  });
  beforeEach(async () => {
    await truncateTables(db, 'event_outbox, outbox_deliveries');
  });

  const insert = (tenant: string, count: number, client?: Client) => {
    const text = `insert into event_outbox (id, tenant_id, event_name, payload, created_at)
                  select gen_random_uuid(), $1::uuid, $2, '{}'::jsonb, now() - $3 * interval '1 second'
                    from generate_series(1, $4::int)`;
    return client
      ? client.query(text, [tenant, 'test.late.v1', 600, count])
      : db.sql(text, [tenant, 'test.thing.created.v1', 60, count]);
  };
  /** Settles a tenant's pending events as the relay's outcomes do, 100 per transaction. */
  const settle = async (tenant: string): Promise<void> => {
    for (;;) {
      const rows = await db.sql(
        `update event_outbox set status = 'published', published_at = now(), updated_at = now()
          where id in (select id from event_outbox where tenant_id = $1 and status = 'pending' order by seq limit 100)
          returning id`,
        [tenant],
      );
      if (rows.length === 0) return;
    }
  };
  const read = async (readings: PendingAgeReadings): Promise<number> => {
    const s = readings.statement(outboxNames(), ORPHAN_AFTER_MS);
    return readings.record((await relay.query<OldestPendingAgeRow>(s.text, [...s.values])).rows[0]!);
  };
  /** The one-argument form's age and the readings' in one transaction (one `now()`). */
  const both = async (readings: PendingAgeReadings): Promise<[number, number]> => {
    await relay.query('begin');
    try {
      const [before] = (await relay.query<{ seconds: number }>(ONE_ARGUMENT, [ORPHAN_AFTER_MS])).rows;
      return [before!.seconds, await read(readings)];
    } finally {
      await relay.query('rollback');
    }
  };
  /** Shared buffers (hit and read) of one statement. */
  const buffers = async (text: string, values: readonly unknown[]): Promise<number> => {
    const [
      {
        'QUERY PLAN': [plan],
      },
    ] = (await relay.query(`explain (analyze, buffers, format json) ${text}`, [...values])).rows;
    return plan.Plan['Shared Hit Blocks'] + plan.Plan['Shared Read Blocks'];
  };

  it('reads a bounded number of buffers while a snapshot is held, where a reading from each start reads every event settled since, and gives the same age', async () => {
    await insert(B, 1);
    const holder = new Client({ connectionString: db.url });
    await holder.connect();
    try {
      await holder.query('begin isolation level repeatable read');
      await holder.query('select 1');
      const readings = new PendingAgeReadings();
      // 30,000 events settled under the hold, a reading after every 2,000 (a health check every 5 s at 400/s)
      for (let chunk = 0; chunk < 15; chunk++) {
        await insert(A, 2000);
        await settle(A);
        await read(readings);
      }
      await insert(A, 20);
      const s = readings.statement(outboxNames(), ORPHAN_AFTER_MS);
      const fromPositions = await buffers(s.text, s.values);
      const fromStart = await buffers(ONE_ARGUMENT, [ORPHAN_AFTER_MS]);
      // the hold is in force: the one-argument form walks the 30,000 entries twice (finding the tenants, then
      // each tenant's oldest), about 1,600 buffers on PostgreSQL 15; from the positions, about 100
      expect(fromStart).toBeGreaterThan(1000);
      expect(fromPositions).toBeLessThan(400);
      const [before, after] = await both(readings);
      expect(after).toBe(before);
      expect(after).toBeGreaterThanOrEqual(60);
    } finally {
      await holder.end();
    }
  }, 120_000);

  it('does not pass an event that took its seq before the readings and commits after them', async () => {
    await insert(B, 1);
    await settle(B);
    const locker = new Client({ connectionString: db.url });
    const late = new Client({ connectionString: db.url });
    await locker.connect();
    await late.connect();
    try {
      await locker.query('begin');
      await locker.query('select pg_advisory_xact_lock($1)', [LATE_LOCK]);
      await late.query('begin');
      // takes its seq, then waits in the trigger, with no transaction id yet
      const inserting = insert(A, 1, late);
      await waitFor(
        async () =>
          (
            await db.sql(
              `select 1 from pg_locks where locktype = 'advisory' and not granted and objid = $1`,
              [LATE_LOCK],
            )
          ).length > 0,
        { message: 'the late insert waiting in its trigger' },
      );
      // later events, all settled, with readings between: the positions would pass the late event's seq
      const readings = new PendingAgeReadings();
      for (let round = 0; round < 4; round++) {
        await insert(A, 50);
        await settle(A);
        await read(readings);
      }
      await locker.query('commit');
      await inserting;
      await late.query('commit');
      const [before, after] = await both(readings);
      // the late event was created 10 minutes ago: the oldest work not done
      expect(before).toBeGreaterThanOrEqual(600);
      expect(after).toBe(before);
    } finally {
      await locker.end();
      await late.end();
    }
  });
});
