import { Client } from 'pg';
import { randomUUID } from 'node:crypto';
import { OUTBOX_DEFAULTS } from '../../libs/outbox/src/options/outbox-options';
import { NIL_UUID } from '../../libs/outbox/src/model/outbox.constants';
import {
  claimNewEvents,
  fanOutPendingEvents,
  outboxNames,
  setTransactionContext,
  type SqlStatement,
} from '../../libs/outbox/src/store/sql';
import { insertClaimHistory, insertPendingEvents, registerLiveConsumer } from '../support/claim-history';
import { literalArguments } from '../support/generic-plan-buffers';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { TENANT, truncateOutbox } from '../support/outbox-fixture';

const EVENT = 'test.lease-probe.v1';
const CONSUMER = 'leaseProbe.local';
const NAMES = outboxNames();
/** Leases taken and released since the last vacuum: 2,000 × 10, the relay's default interval ten times over. */
const DEAD = 20_000;

/**
 * The claims of new events pass by each pending event under a live lease (the other lane's batch in flight is still
 * `pending`), probing the lease table for it (`notLeased`). A generic plan made while that table was empty or a
 * page or two (after a truncation, an autovacuum that truncated it, a drain's first claims) probed it by a
 * sequential scan per event, kept until a vacuum made PostgreSQL plan it anew: every lease taken and released
 * meanwhile was read once per event passed by. In the claim's transaction, as the relay sends it
 * (`RelayPolicy.leaseProbesByKey`), the plan probes the table's key whatever its size when it was made
 * (docs/adr/0804-a-lean-claim-for-in-process-consumers.md, addendum on the lease probe).
 */
describe("the claims' lease probe", () => {
  let db: TestDatabase;
  let relay: Client;
  beforeAll(async () => {
    db = await createTestDatabase();
    // no autovacuum of the table during the test: its statistics would make every session plan anew
    await db.sql('alter table outbox_event_leases set (autovacuum_enabled = false)');
    relay = new Client({ connectionString: db.url });
    await relay.connect();
  });
  afterEach(() => truncateOutbox(db));
  afterAll(async () => {
    await relay?.end();
    await db?.drop();
  });

  /** The claim's context as the relay sends it before a named statement: generic plans, the lease probed by key. */
  const claimContext = (): SqlStatement =>
    setTransactionContext(OUTBOX_DEFAULTS.tenantSetting, TENANT, 30_000, { durable: false, byKey: true })
      .withGenericPlans!;

  const claims: [string, (limit: number, leaseToken: string) => SqlStatement][] = [
    [
      'the lean claim',
      (limit, leaseToken) =>
        claimNewEvents(NAMES, {
          tenantId: TENANT,
          inProcess: [CONSUMER],
          liveWithinMs: 60_000,
          limit,
          leaseToken,
          leaseMs: 30_000,
        }),
    ],
    [
      'the fan-out',
      (limit, leaseToken) =>
        fanOutPendingEvents(NAMES, {
          tenantId: TENANT,
          hosted: [CONSUMER],
          inProcess: [CONSUMER],
          tenantConsumers: [],
          liveWithinMs: 60_000,
          limit,
          leaseToken,
          leaseMs: 30_000,
        }),
    ],
  ];

  it.each(claims)(
    '%s probes each event passed by through the key, on a plan made while the lease table was empty',
    async (_, claim) => {
      const name = `lease_probe_${randomUUID().slice(0, 8)}`;
      // a backlog of 300 pending events, its consumer, and the lease table as a truncation leaves it: no page
      await registerLiveConsumer(db, CONSUMER, [EVENT]);
      await insertPendingEvents(db, TENANT, EVENT, 300);
      await db.sql('analyze event_outbox');
      await db.sql('vacuum analyze outbox_event_leases');
      // the relay's session: the statement named and its generic plan made now, as the warm-up does (nothing taken)
      await relay.query('begin');
      await relay.query(claimContext().text, claimContext().values);
      const warmUp = claim(0, randomUUID());
      await relay.query({ name, text: warmUp.text, values: warmUp.values });
      await relay.query('rollback');

      // then a drain between two vacuums: the first 200 events under the other lane's live lease, and DEAD leases
      // taken and released
      await db.sql(
        `insert into outbox_event_leases (event_id, tenant_id, lease_token, lease_expires_at)
         select id, tenant_id, gen_random_uuid(), now() + interval '1 minute' from event_outbox order by seq limit 200`,
      );
      await db.sql(
        `insert into outbox_event_leases (event_id, tenant_id, lease_token, lease_expires_at)
         select gen_random_uuid(), $1, gen_random_uuid(), now() + interval '1 minute' from generate_series(1, $2::int)`,
        [TENANT, DEAD],
      );
      await db.sql(`delete from outbox_event_leases where event_id not in (select id from event_outbox)`);

      const token = randomUUID();
      const statement = claim(100, token);
      await relay.query('begin');
      try {
        await relay.query(claimContext().text, claimContext().values);
        const { rows } = await relay.query<{ 'QUERY PLAN': string }>(
          `explain (analyze, buffers, costs off, timing off, summary off) execute ${name}(${literalArguments(relay, statement)})`,
        );
        const plan = rows.map((r) => r['QUERY PLAN']);
        const top = plan.find((l) => /Buffers:/.test(l)) ?? '';
        const buffers = [...top.matchAll(/(?:hit|read)=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
        // it passed by the 200 leased events and took the next 100
        const [{ taken }] = (
          await relay.query<{ taken: number }>(
            `select count(*)::int as taken from outbox_event_leases where lease_token = $1`,
            [token],
          )
        ).rows as [{ taken: number }];
        expect(taken).toBe(100);
        // each of the 300 events looked at (200 passed by, 100 taken) probed through the key, nothing scanned whole
        const probe = plan.find((l) => / using outbox_event_leases_pkey on outbox_event_leases l \(/.test(l));
        expect(probe).toMatch(/loops=300\)/);
        expect(plan.filter((l) => /Seq Scan on outbox_event_leases/.test(l))).toEqual([]);
        // a sequential scan per event read the table's ~220 pages 300 times (66,000 buffers and more); by key, a
        // few buffers per event
        expect(buffers).toBeLessThan(4_000);
      } finally {
        await relay.query('rollback');
        await relay.query(`deallocate ${name}`);
      }
    },
  );

  it.each(claims)(
    '%s probes the key in a plan made over an empty lease table beside a history of events and deliveries',
    async (_, claim) => {
      // the tables as a relay that ran a while and went idle leaves them: events half pending, half processing with
      // a delivery row, statistics read while 200 leases were live; then the lease table emptied and truncated
      await insertClaimHistory(db, TENANT, EVENT, CONSUMER);
      await db.sql(
        `insert into outbox_event_leases (event_id, tenant_id, lease_token, lease_expires_at)
         select id, tenant_id, gen_random_uuid(), now() from event_outbox where status = 'pending' limit 200`,
      );
      await db.sql('analyze');
      await db.sql('truncate outbox_event_leases');
      await db.sql('vacuum analyze outbox_event_leases');
      const statement = claim(100, randomUUID());
      await relay.query('begin');
      try {
        await relay.query(claimContext().text, claimContext().values);
        await relay.query(`prepare lease_probe_plan as ${statement.text}`);
        const args = statement.values.map((v) => (v === NIL_UUID ? `'${NIL_UUID}'` : 'null'));
        const { rows } = await relay.query<{ 'QUERY PLAN': string }>(
          `explain (costs off) execute lease_probe_plan(${args.join(', ')})`,
        );
        const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
        const fresh = plan.slice(
          plan.indexOf('CTE fresh'),
          plan.indexOf('CTE ', plan.indexOf('CTE fresh') + 1),
        );
        // with sequential scans off and `lease_expires_at > now()` in the probe, the planner chose the expiry index,
        // a range of every live lease and of every one deleted within the lease's length, walked per event
        expect(fresh).toMatch(
          /Index Scan using outbox_event_leases_pkey on outbox_event_leases l\s+Index Cond: \(event_id = e(_\d+)?\.id\)/,
        );
      } finally {
        await relay.query('rollback');
        await relay.query('deallocate lease_probe_plan').catch(() => undefined);
      }
    },
  );
});
